"""``manage.py runworkers``: run a worker process. Flag parsing and wiring only."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import signal
import sys
from collections.abc import Mapping
from typing import Any

from django.core import checks
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from jobqueue.checks import CHECK_TAG
from jobqueue.cron.scheduler import Scheduler
from jobqueue.errors import JobQueueConfigurationError
from jobqueue.logging import PlainFormatter
from jobqueue.maintenance.pruning import Pruner
from jobqueue.maintenance.relay import OutboxRelay
from jobqueue.maintenance.services import DepthSampler
from jobqueue.management.arguments import (
    MAX_WORKER_ID_LENGTH,
    in_range,
    queue_names,
    queue_spec,
    text_arg,
    worker_id_text,
)
from jobqueue.settings.conf import get_settings
from jobqueue.settings.queues import EVERY_QUEUE
from jobqueue.store.pooler import listen_alias, refuse_unmarked_pooler
from jobqueue.worker.aliases import AliasShare, alias_shares
from jobqueue.worker.deaths import count_death, hand_back_leases
from jobqueue.worker.handoff import run_relay
from jobqueue.worker.loop import Worker, default_worker_id
from jobqueue.worker.stopping import STANDALONE, SUPERVISED
from jobqueue.worker.supervisor import EXIT_RECYCLE, Supervisor, reexec


def _spec(queues: tuple[str, ...], weights: tuple[int, ...]) -> str:
    return ",".join(f"{q}:{w}" for q, w in zip(queues, weights, strict=True))


def _require_migrations(alias: str) -> None:
    """Refuse to start on a database whose jobqueue tables are missing or out of date.

    A worker there would fail every statement; its database retry loop is for outages, not for
    a forgotten ``migrate``, so say so now. If the database cannot be reached at all, start
    anyway: the worker waits for it.

    Every jobqueue migration on disk recorded as applied (the usual case) is enough: one query,
    without loading every app's migration graph (about 20 ms of CPU per start). Otherwise the
    graph decides (a squashed migration counts as applied when what it replaces is).
    """
    connection = connections[alias]
    try:
        applied = MigrationRecorder(connection).applied_migrations()
        if all(("jobqueue", name) in applied for name in _jobqueue_migration_names()):
            return
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError:
        return
    finally:
        connection.close()
    pending = [migration.name for migration, _ in plan if migration.app_label == "jobqueue"]
    if pending:
        raise CommandError(
            f"the jobqueue tables in database {alias!r} are not up to date (unapplied: "
            f"{', '.join(pending)}); run `python manage.py migrate` first"
        )


def _jobqueue_migration_names() -> list[str]:
    """Return the names of jobqueue's migrations on disk (``MIGRATION_MODULES`` respected)."""
    module_name, _ = MigrationLoader.migrations_module("jobqueue")
    if module_name is None:
        return []  # migrations turned off for the app: nothing to require
    module = importlib.import_module(module_name)
    return [
        info.name
        for info in pkgutil.iter_modules(module.__path__)
        if not info.ispkg and not info.name.startswith(("_", "~"))
    ]


def _check_exclusions(queues: tuple[str, ...], exclude: tuple[str, ...]) -> None:
    """Refuse ``--exclude-queues`` without ``*``, or naming a queue ``--queues`` names."""
    if not exclude:
        return
    if EVERY_QUEUE not in queues:
        raise CommandError(
            f"--exclude-queues only with '*' in --queues (it leaves queues out of every queue); "
            f"--queues {','.join(queues)} serves only the queues it names"
        )
    both = [name for name in exclude if name in queues]
    if both:
        raise CommandError(
            f"--exclude-queues {both[0]!r} is also in --queues: a queue is served or left out, "
            "not both"
        )


class Command(BaseCommand):
    help = (
        "Run a jobqueue worker: claim jobs from the queues, run them on a thread pool, "
        "heartbeat their leases, and fire cron entries while this process holds the leader "
        "lease. SIGTERM (to this process or to its whole process group) drains within "
        "--grace; SIGINT (Ctrl-C) or a second SIGTERM releases running jobs at once."
    )
    # The checks that concern a worker: jobqueue's own (settings, cron, queue and pooled
    # databases) and what its handlers use (models, caches, signals, async). The web's (admin,
    # URLs, templates, static files, security) are `manage.py check`'s at deploy: running them
    # here cost each worker start about half its checks' time (docs/decisions.md, 2026-12-05).
    # The database and its migrations are checked below, once per database served.
    requires_system_checks = [
        CHECK_TAG,
        checks.Tags.models,
        checks.Tags.caches,
        checks.Tags.signals,
        checks.Tags.async_support,
        checks.Tags.compatibility,
    ]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--queues",
            type=queue_spec,
            default=None,
            metavar="NAME[:WEIGHT],...",
            help="queues to serve, each with an optional weight: 'critical:6,default:3,bulk:1' "
            "serves busy queues 6:3:1 (default weight 1; default: JOBQUEUE['QUEUES'], i.e. "
            "'default'); a last '*' (or '*:N') serves every other queue too, including ones "
            "created later, each with weight 1 (or N): '*' alone serves them all",
        )
        parser.add_argument(
            "--exclude-queues",
            type=queue_names,
            default=(),
            metavar="NAME,...",
            help="queues '*' leaves out (only with '*' in --queues; not a queue named there)",
        )
        parser.add_argument(
            "--max-tasks",
            type=in_range("--max-tasks"),
            default=None,
            metavar="N",
            help="finish N jobs (whatever their outcome), then stop claiming, drain and exit 0; "
            "under --processes the supervisor replaces the process at once (recycling)",
        )
        parser.add_argument(
            "--max-memory-per-child",
            type=in_range("--max-memory-per-child"),
            default=None,
            metavar="MB",
            help="after a job, if this process's resident memory is over MB (MiB), stop "
            "claiming, drain and recycle: under --processes the supervisor replaces the process, "
            "alone it re-runs itself in place",
        )
        parser.add_argument(
            "--strict",
            action="store_true",
            help="serve --queues in the order listed: a queue only when the ones before it "
            "have no claimable job (no weights)",
        )
        parser.add_argument(
            "--concurrency",
            type=in_range("--concurrency"),
            default=None,
            help="sync jobs run at once, in threads (default: JOBQUEUE['CONCURRENCY'])",
        )
        parser.add_argument(
            "--async-concurrency",
            type=in_range("--async-concurrency"),
            default=None,
            metavar="N",
            help="async def jobs run at once on the process's event loop, besides the threads "
            "(default: JOBQUEUE['ASYNC_CONCURRENCY'], 100)",
        )
        parser.add_argument(
            "--lease",
            type=in_range("--lease"),
            default=None,
            metavar="SECONDS",
            help="lease length (default: JOBQUEUE['LEASE_SECONDS'])",
        )
        parser.add_argument(
            "--poll-interval",
            type=in_range("--poll-interval"),
            default=None,
            metavar="SECONDS",
            help="idle wait between claims (default: JOBQUEUE['POLL_INTERVAL_SECONDS'])",
        )
        parser.add_argument(
            "--grace",
            type=in_range("--grace"),
            default=None,
            metavar="SECONDS",
            help="time running jobs get to finish after SIGTERM "
            "(default: JOBQUEUE['GRACE_SECONDS'])",
        )
        parser.add_argument(
            "--burst", action="store_true", help="exit once no job is claimable and none is running"
        )
        parser.add_argument(
            "--worker-id",
            type=worker_id_text,
            default=None,
            help="name to hold leases under (default: host:pid:random)",
        )
        parser.add_argument(
            "--database",
            type=text_arg,
            default=None,
            help="serve every queue on this database alias only (default: each queue on the "
            "aliases JOBQUEUE['QUEUE_DATABASES'] places it on, one process per alias; "
            "'default' without the setting)",
        )
        parser.add_argument(
            "--processes",
            type=in_range("--processes"),
            default=None,
            help="run N worker processes under a supervisor that restarts any that die and "
            "recycles one whose job overran its timeout (default: one worker, in this process)",
        )
        parser.add_argument(
            "--no-scheduler",
            action="store_true",
            help="never fire cron entries here: do not run for the leader lease, and do not "
            "reconcile JOBQUEUE['CRON']",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._configure_logging(options["verbosity"])
        conf = get_settings()
        if options["database"] is not None and options["database"] not in connections:
            raise CommandError(f"--database {options['database']!r} is not in DATABASES")
        queues, weights = options["queues"] or (conf.queues, conf.queue_weights)
        shares = alias_shares(queues, weights, options["database"])
        for share in shares:
            _require_migrations(share.alias)
            try:
                # Behind a transaction pooler not marked as such, LISTEN loses wake-ups and
                # session state leaks between clients: refuse now, not after the first lost job.
                refuse_unmarked_pooler(share.alias)
            except JobQueueConfigurationError as exc:
                raise CommandError(str(exc)) from exc
        if options["strict"] and any(weight != 1 for weight in weights):
            raise CommandError(
                "--strict serves queues in the order listed, so weights do not apply: drop "
                f"--strict or the :N weights ({_spec(queues, weights)})"
            )
        _check_exclusions(queues, options["exclude_queues"])
        settings = {
            "strict": options["strict"],
            "concurrency": options["concurrency"],
            "async_concurrency": options["async_concurrency"],
            "lease_s": options["lease"],
            "poll_interval_s": options["poll_interval"],
            "grace_s": options["grace"],
            "burst": options["burst"],
            "exclude_queues": options["exclude_queues"],
            "max_tasks": options["max_tasks"],
            "max_memory_mb": options["max_memory_per_child"],
        }
        with_scheduler = not options["no_scheduler"] and not options["burst"]

        def run_worker(
            worker_id: str | None,
            *,
            recycle: bool,
            share: AliasShare,
            wake_fd: int | None = None,
            sharing: int = 1,
        ) -> Worker:
            # Built in the process that runs it: under --processes, after the fork.
            worker_id = worker_id or default_worker_id()
            using = share.alias
            if len(shares) > 1:
                logging.getLogger("jobqueue.worker").info(
                    "worker %s serves database %r: queues %s",
                    worker_id,
                    using,
                    _spec(share.queues, share.weights),
                )
            services: list[Any] = []
            scheduler = None
            if with_scheduler:
                scheduler = Scheduler(holder=worker_id, using=using, sharing=sharing)
                services.append(scheduler)
            if not options["burst"]:
                # Every worker prunes in small SKIP LOCKED batches: safe to run in many at once.
                services.append(Pruner(using=using))
                # The rollup's depth and lag, once a minute for the cluster (the first wins).
                services.append(DepthSampler(using=using))
                # Jobs enqueued in callers' transactions on other databases (issue 16).
                relay = OutboxRelay(using=using)
                if relay.sources:
                    services.append(relay)
            worker = Worker(
                worker_id=worker_id,
                services=services,
                recycle_on_overrun=recycle,
                # Under the supervisor (recycle): a group-wide SIGTERM must drain only once.
                stop_signals=SUPERVISED if recycle else STANDALONE,
                queues=share.queues,
                weights=share.weights,
                using=using,
                wake_fd=wake_fd,
                sharing=sharing,
                **settings,
            )
            try:
                worker.exit_code = worker.run()
            finally:
                if scheduler is not None:
                    # Let the leader lease lapse now, so another process fires the next time.
                    try:
                        scheduler.stop()
                    except DatabaseError as exc:
                        logging.getLogger("jobqueue.scheduler").error(
                            "could not resign the leader lease (it lapses by itself): %s", exc
                        )
                    finally:
                        connections.close_all()
            return worker

        processes = options["processes"]
        if processes is None and len(shares) == 1:
            worker = run_worker(options["worker_id"], recycle=False, share=shares[0])
            code = worker.exit_code
            assert code is not None  # run_worker returns only once run() has set it
            if code == EXIT_RECYCLE and sys.argv[1:2] == ["runworkers"]:
                # Run from the command line (not call_command): recycle in place. It holds no
                # lease any more: Ctrl-C ends it at once, and a SIGTERM is held across the exec
                # for the new worker to handle as a stop (exit 0).
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                if not worker.stop_requested:
                    reexec(sys.orig_argv)
                code = 0
            if worker.abandoned_jobs:
                # Handler threads cannot be killed; their leases are released, so end the
                # process with them instead of waiting for them at interpreter exit.
                logging.shutdown()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
            if code:
                sys.exit(code)
            return

        alias_of: dict[str, str] = {}

        def slot_worker_id(slot: int, pid: int, nonce: str) -> str:
            # Named by the child's pid (leased_by points at the process to signal), with a
            # nonce the supervisor drew, so that it knows whose leases a dead child held.
            worker_id = options["worker_id"]
            if worker_id:
                worker_id = f"{worker_id}-{slot}"[:MAX_WORKER_ID_LENGTH]
            else:
                worker_id = default_worker_id(pid, nonce)
            alias_of[worker_id] = shares[slot % len(shares)].alias  # for hand_back, below
            return worker_id

        def run_slot(slot: int, worker_id: str) -> int:
            # Slots take the aliases in turn: N processes per alias, each on one alias.
            share = shares[slot % len(shares)]
            worker = run_worker(
                worker_id,
                recycle=True,
                share=share,
                wake_fd=supervisor.wake_fd(slot) if relayed(share) else None,
                sharing=processes or 1,
            )
            code = worker.exit_code
            assert code is not None  # as above
            if code == 0 and worker.quota.spent and not worker.stop_requested:
                return EXIT_RECYCLE  # done with --max-tasks: the supervisor replaces it now
            return code

        grace = conf.grace_seconds if options["grace"] is None else options["grace"]

        def hand_back(worker_id: str, cause: str) -> None:
            # A dead child held leases on its slot's alias only.
            hand_back_leases(worker_id, alias_of.get(worker_id, shares[0].alias), cause)

        def listens_on(alias: str) -> str | None:
            # Where a worker of ``alias`` LISTENs: never through a pooler, only on PostgreSQL.
            listen_on = listen_alias(alias) if conf.listen_notify else None
            if listen_on is None or connections[listen_on].vendor != "postgresql":
                return None
            return listen_on

        def polled(share: AliasShare) -> bool:
            # Nobody can LISTEN for it: the relay polls for the host (handoff.py). Not "*",
            # which names no queue to probe, nor SQLite, whose processes poll a local file.
            return (
                listens_on(share.alias) is None
                and connections[share.alias].vendor == "postgresql"
                and EVERY_QUEUE not in share.queues
            )

        def relayed(share: AliasShare) -> bool:
            return listens_on(share.alias) is not None or polled(share)

        def relay(fds: Mapping[int, int]) -> int:
            # One listening connection per database for all the slots on it, or one poll per
            # interval where none can LISTEN (handoff.py).
            by_alias: dict[str, list[int]] = {}
            by_polled: dict[AliasShare, list[int]] = {}
            for slot, fd in fds.items():
                share = shares[slot % len(shares)]
                listen_on = listens_on(share.alias)
                if listen_on is not None:
                    by_alias.setdefault(listen_on, []).append(fd)
                elif polled(share):
                    by_polled.setdefault(share, []).append(fd)
            return run_relay(
                by_alias,
                "jobqueue-relay",
                polled=[(share.alias, fds, share.queues) for share, fds in by_polled.items()],
                poll_interval_s=options["poll_interval"] or conf.poll_interval_seconds,
            )

        listening = any(relayed(share) for share in shares)

        supervisor = Supervisor(
            processes=(processes or 1) * len(shares),
            run_worker=run_slot,
            grace_s=grace,
            worker_id_for=slot_worker_id,
            hand_back=hand_back,
            record_death=lambda cause: count_death(cause, shares[0].alias),
            relay=relay if listening else None,
        )
        supervisor.run()

    def _configure_logging(self, verbosity: int) -> None:
        log = logging.getLogger("jobqueue")
        if log.handlers or logging.getLogger().handlers:
            return
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(PlainFormatter())
        log.addHandler(handler)
        log.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))

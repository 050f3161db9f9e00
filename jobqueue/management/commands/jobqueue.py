"""``manage.py jobqueue VERB``: the operator's CLI. Parsing, wiring and printing only.

Verbs: ``status``, ``jobs``, ``show``, ``batch``, ``retry``, ``cancel``, ``pause``, ``resume``,
``prune`` (``prunejobs``), ``health``, and ``cron``, ``workers``, ``breakers``, ``run-now``
(``jobqueue/management/operate.py``). Django's options (``--settings``, ``-v``) are taken before
or after the verb; output piped into ``head`` ends quietly. Without ``--database`` each covers
every queue database (``JOBQUEUE["QUEUE_DATABASES"]``); a job or batch id found on two of them is
refused (exit 2) until ``--database`` names one: ids are per database. Every read verb takes
``--json``. Exit status: 0 when all is well (pausing what is paused, or resuming what is not,
included: the message says so), 1 when something is unhealthy or not found (or a bulk action was
refused for want of ``--yes``), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from typing import Any

from django.core.management import call_command, load_command_class
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections

from jobqueue import arguments
from jobqueue.errors import BatchNotFound
from jobqueue.flows.batches import batch_status
from jobqueue.limits import pauses as pausing
from jobqueue.management import operate, render
from jobqueue.management.arguments import (
    add_actor,
    add_django_options,
    add_filters,
    job_id_arg,
    limit_arg,
    looked_on,
    refuse_ambiguous,
    seconds_arg,
    text_arg,
)
from jobqueue.management.status import status
from jobqueue.models import Job
from jobqueue.ops import actions, audit, health
from jobqueue.ops.audit import operator_name
from jobqueue.ops.clock import db_now
from jobqueue.ops.jobs import JobFilter, detail, matching, summary
from jobqueue.ops.queues import TOP_QUEUES
from jobqueue.ops.where import UnknownDatabase, locate, report_aliases
from jobqueue.routing import all_queue_aliases, queue_aliases
from jobqueue.states import CANCELLABLE, RETRYABLE
from jobqueue.store.failures import classify


class Command(BaseCommand):
    help = (
        "Inspect and operate the job queue: status, jobs, show, batch, retry, cancel, pause, "
        "resume, prune, health, cron, workers, breakers, run-now."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        # Django's own options (--settings, -v, ...) are taken after the verb too.
        base = argparse.ArgumentParser(add_help=False)
        add_django_options(base)
        common = argparse.ArgumentParser(add_help=False, parents=[base])
        common.add_argument(
            "--database",
            type=text_arg,
            default=None,
            metavar="ALIAS",
            help="one database alias (default: every queue database; job ids are per database)",
        )
        reads = argparse.ArgumentParser(add_help=False, parents=[common])
        reads.add_argument("--json", action="store_true", help="print JSON for scripts")
        # pause and resume name a queue, not jobs: their own --database help.
        targets = argparse.ArgumentParser(add_help=False, parents=[base])
        targets.add_argument(
            "--database",
            type=text_arg,
            default=None,
            metavar="ALIAS",
            help="one database alias (default: every database the queue lives on)",
        )
        verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

        status_verb = verbs.add_parser(
            "status",
            parents=[reads],
            help="per queue: ready, scheduled, leased, dead, lag, rate; workers; breakers "
            "(exit 1 if a queue with ready jobs has no live worker)",
        )
        status_verb.add_argument(
            "--all",
            action="store_true",
            dest="all_queues",
            help=f"a row for every queue (default: past {TOP_QUEUES} queues, the deepest, the "
            "oldest and the unserved, the rest summed in one row; --json always lists every queue)",
        )

        jobs = verbs.add_parser("jobs", parents=[reads], help="list jobs, newest first")
        add_filters(jobs)
        jobs.add_argument(
            "--limit", type=limit_arg, default=50, help="most jobs listed, 1..10000 (default 50)"
        )

        show = verbs.add_parser(
            "show", parents=[reads], help="one job in full, with its error history"
        )
        show.add_argument("id", type=job_id_arg, help="job id")
        batch = verbs.add_parser(
            "batch", parents=[reads], help="one batch: its counts by outcome and its callbacks"
        )
        batch.add_argument("id", type=job_id_arg, help="batch id")

        for verb, states in (("retry", RETRYABLE), ("cancel", CANCELLABLE)):
            sub = verbs.add_parser(
                verb,
                parents=[reads],
                help=f"{verb} jobs by id, or every job a filter matches (--yes for more than one)",
            )
            sub.add_argument("ids", nargs="*", type=job_id_arg, metavar="ID", help="job ids")
            add_filters(sub, states=sorted(states))
            sub.add_argument(
                "--yes", action="store_true", help="act on every job the filter matches"
            )
            add_actor(sub)

        for verb, says in (
            (
                "pause",
                "stop every worker claiming jobs of a queue (or --type); running jobs finish",
            ),
            ("resume", "let workers claim a paused queue (or --type) again, at once"),
        ):
            sub = verbs.add_parser(verb, parents=[targets], help=says)
            sub.add_argument("queue", nargs="?", type=text_arg, metavar="QUEUE", help="queue name")
            sub.add_argument(
                "--type", dest="job_type", type=text_arg, metavar="TYPE", help="a job type instead"
            )
            add_actor(sub)
            if verb == "pause":
                sub.add_argument("--reason", type=text_arg, default="", help="why, for the record")

        prune = verbs.add_parser(
            "prune", add_help=False, help="delete expired finished jobs (prunejobs; see its --help)"
        )
        prune.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

        probe = verbs.add_parser(
            "health",
            parents=[reads],
            help="exit 0 if the database answers, this host's workers heartbeat and cron fires",
        )
        probe.add_argument(
            "--host", type=text_arg, help="host whose workers must be alive (default: this one)"
        )
        probe.add_argument(
            "--max-silence",
            type=seconds_arg("--max-silence"),
            default=None,
            metavar="SECONDS",
            help="a worker silent this long is dead (default: 3 heartbeat intervals), 1..86400",
        )
        operate.add_verbs(verbs, common, reads)
        probe.add_argument(
            "--cron-max-delay",
            type=seconds_arg("--cron-max-delay"),
            default=health.DEFAULT_CRON_MAX_DELAY_SECONDS,
            metavar="SECONDS",
            help="how late a cron fire may be (default "
            f"{health.DEFAULT_CRON_MAX_DELAY_SECONDS:.0f}), 1..86400",
        )

    def run_from_argv(self, argv: list[str]) -> None:
        """Run from the command line; output cut short by a closed pipe ends quietly.

        ``manage.py jobqueue status | head -3``: once ``head`` has its lines, writing (or the
        final flush) raises ``BrokenPipeError``; that is the reader's choice, not an error, so
        the rest of the output goes to ``/dev/null`` and the exit status is 141 (SIGPIPE), as a
        shell tool's is.
        """
        try:
            super().run_from_argv(argv)
            sys.stdout.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(141) from None

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        """Return the parser; ``prune ...`` passes every argument after it to ``prunejobs``.

        argparse's REMAINDER does not take arguments that start with ``--`` after a subcommand,
        so the words after ``prune`` are set aside before parsing and handed over untouched.
        """
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parse = parser.parse_args

        def parse_args(args: Any = None, namespace: Any = None) -> argparse.Namespace:
            words = [str(a) for a in (sys.argv[2:] if args is None else args)]
            if words[:1] != ["prune"]:
                return parse(args, namespace)
            parsed = parse(["prune"], namespace)
            parsed.rest = words[1:]
            return parsed

        parser.parse_args = parse_args  # type: ignore[method-assign,assignment]
        return parser

    def handle(self, *args: Any, **options: Any) -> None:
        # Every line this command writes has its control characters escaped.
        self.stdout = render.SafeOutput(self.stdout)
        self.stderr = render.SafeOutput(self.stderr)
        verb = options["verb"]
        if verb == "prune":
            self._prune(options["rest"])
            return
        try:
            aliases = report_aliases(options["database"])
        except UnknownDatabase as exc:
            raise CommandError(f"--database {exc}", returncode=2) from None
        # With several, connect to each first so that the message names the one that is down
        # (health reports that as a failed check of its own instead).
        for alias in aliases if len(aliases) > 1 and verb != "health" else ():
            try:
                connections[alias].ensure_connection()
            except DatabaseError as exc:
                raise CommandError(_unreachable(alias, exc)) from None
        try:
            if verb in operate.VERBS:
                healthy = operate.VERBS[verb](self.stdout.write, aliases, options)
            else:
                healthy = getattr(self, f"_{verb}")(aliases, options)
        except DatabaseError as exc:
            # Not a traceback: the operator needs to know the database is the problem.
            raise CommandError(_unreachable(", ".join(aliases), exc)) from None
        if not healthy:
            self.stdout.flush()
            raise SystemExit(1)

    # -- reads ------------------------------------------------------------------------------

    def _status(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        return status(
            aliases, options["json"], self.stdout.write, every_queue=options["all_queues"]
        )

    def _jobs(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        rows = []
        for alias in aliases:
            now = db_now(alias)
            found = matching(_criteria(options), now, alias)[: options["limit"]]
            rows += [{**summary(job, now), "database": alias} for job in found]
        # Newest first across databases (ids of two databases do not compare).
        rows.sort(key=lambda r: (r["created_at"] or "", r["id"]), reverse=True)
        rows = rows[: options["limit"]]
        if options["json"]:
            self._json(rows)
            return True
        if not rows:
            self.stdout.write("No jobs match.")
            return True
        several = len(aliases) > 1
        cells = [
            [
                *([r["database"]] if several else []),
                r["id"],
                r["queue"],
                r["type"],
                r["state"],
                r["tenant"] or "-",
                f"{r['attempts']}/{r['max_attempts']}",
                r["run_at"][:19].replace("T", " "),
                (r["last_error"] or "")[:60],
            ]
            for r in rows
        ]
        headers = ["ID", "QUEUE", "TYPE", "STATE", "TENANT", "TRIES", "RUN AT (UTC)", "LAST ERROR"]
        if several:
            headers.insert(0, "DATABASE")
        self.stdout.write(render.table(headers, cells))
        return True

    def _show(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        located = locate([options["id"]], aliases)
        refuse_ambiguous("job", located.ambiguous)
        using = next(iter(located.found), "")
        job = Job.objects.using(using).filter(id=options["id"]).first() if using else None
        if job is None:
            self.stderr.write(f"No job with id {options['id']}{looked_on(aliases)}.")
            return False
        row = detail(job, db_now(using))
        if len(aliases) > 1:
            row["database"] = using
        if options["json"]:
            self._json(row)
            return True
        errors = row.pop("errors")
        width = max(len(k) for k in row)
        for key, value in row.items():
            text = (
                render.to_json(value) if isinstance(value, dict | list) else render.cell_text(value)
            )
            self.stdout.write(f"{key.ljust(width)}  {text}")
        self.stdout.write(f"\nHistory ({len(errors)} entries):" if errors else "\nNo history.")
        for entry in errors:
            head = " ".join(
                str(entry[k]) for k in ("at", "kind", "attempt", "worker") if entry.get(k)
            )
            if entry.get("by"):
                head += f" by {entry['by']}"
            said = ": ".join(
                render.cell_text(entry[k]) for k in ("type", "message") if entry.get(k)
            )
            self.stdout.write(f"- {head}: {said}" if said else f"- {head}")
            tail = (entry.get("traceback") or "").rstrip()
            if tail:
                self.stdout.write("    " + tail.replace("\n", "\n    "))
        return True

    def _batch(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        found = {}
        for alias in aliases:
            try:
                found[alias] = batch_status(options["id"], using=alias)
            except BatchNotFound:
                pass
        refuse_ambiguous("batch", {options["id"]: list(found)} if len(found) > 1 else {})
        if not found:
            self.stderr.write(f"No batch with id {options['id']}{looked_on(aliases)}.")
            return False
        [(using, batch)] = found.items()
        row = {**asdict(batch), "done": batch.done}
        if len(aliases) > 1:
            row["database"] = using
        if options["json"]:
            self._json(row)
            return True
        width = max(len(k) for k in row)
        for key, value in row.items():
            self.stdout.write(f"{key.ljust(width)}  {render.cell_text(value)}")
        return True

    def _health(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        verdict = health.check_all(
            aliases,
            host=options["host"],
            max_silence_s=options["max_silence"],
            cron_max_delay_s=options["cron_max_delay"],
        )
        if options["json"]:
            self._json(verdict.as_dict())
        else:
            for c in verdict.checks:
                name = f"{c.name} ({c.database})" if len(aliases) > 1 else c.name
                self.stdout.write(f"{'ok  ' if c.ok else 'FAIL'}  {name}: {c.detail}")
        return verdict.healthy

    # -- writes -----------------------------------------------------------------------------

    def _retry(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        return self._act("retry", actions.retry, RETRYABLE, aliases, options)

    def _cancel(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        return self._act("cancel", actions.cancel, CANCELLABLE, aliases, options)

    def _act(
        self, verb: str, act: Any, states: frozenset, aliases: tuple[str, ...], options: dict
    ) -> bool:
        criteria = _criteria(options)
        ids: list[int] = options["ids"]
        if ids and not criteria.empty:
            raise CommandError("give job ids or filters, not both", returncode=2)
        missing: list[int] = []
        if ids:
            # Ids are per database: an id on two of them is refused, nothing done.
            located = locate(ids, aliases)
            refuse_ambiguous("job", located.ambiguous)
            by_alias, missing = located.found, located.missing
        else:
            if criteria.empty:
                raise CommandError(
                    f"name the jobs to {verb}: ids, or --queue/--state/--type/--tenant",
                    returncode=2,
                )
            by_alias = {}
            for alias in aliases:
                query = matching(criteria, db_now(alias), alias)
                if criteria.state is None:
                    query = query.filter(state__in=sorted(states))
                by_alias[alias] = list(query.order_by("id").values_list("id", flat=True))
            matched = sum(len(found) for found in by_alias.values())
            if matched > 1 and not options["yes"]:
                self.stderr.write(
                    f"{matched} jobs match; nothing done. Add --yes to {verb} them all."
                )
                return False
        outcome = actions.BulkResult(missing=missing)
        for alias, found in by_alias.items():
            progress = self._progress(len(found)) if len(found) > actions.CHUNK else None
            done = act(found, alias, progress, by=self._actor(options))
            outcome.done += done.done
            outcome.skipped.update(done.skipped)
            outcome.missing += done.missing
        if options["json"]:
            self._json(outcome.as_dict())
        else:
            past = "Retried" if verb == "retry" else "Cancelled"
            self.stdout.write(f"{past} {len(outcome.done)} job(s).")
            for job_id, why in sorted(outcome.skipped.items()):
                self.stdout.write(f"  skipped {job_id}: {why}")
            for job_id in outcome.missing:
                self.stdout.write(f"  not found: {job_id}")
        return not outcome.missing

    def _pause(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        kind, name = self._pause_target(options)
        by = self._actor(options)
        act = pausing.pause if kind == "queue" else pausing.pause_type
        # Without --database: every database the queue lives on (a type: every queue database).
        using = options["database"]
        try:
            made = act(name, by=by, reason=options["reason"], using=using)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        first = using or (queue_aliases(name) if kind == "queue" else all_queue_aliases())[0]
        [entry] = [p for p in pausing.paused(first) if (p.kind, p.name) == (kind, name)]
        since = render.by_since(entry.paused_by, entry.paused_at)
        if made:
            self.stdout.write(
                f"Paused {kind} {name} ({since}). Workers claim none of its jobs from their "
                "next claim on; running jobs finish; enqueue keeps working."
            )
        else:
            self.stdout.write(
                f"{kind.capitalize()} {name} was already paused ({since}); unchanged."
            )
        return True

    def _resume(self, aliases: tuple[str, ...], options: dict[str, Any]) -> bool:
        kind, name = self._pause_target(options)
        act = pausing.resume if kind == "queue" else pausing.resume_type
        try:
            lifted = act(name, by=self._actor(options), using=options["database"])
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if lifted:
            self.stdout.write(f"Resumed {kind} {name}; workers claim its jobs again.")
        else:
            self.stdout.write(f"{kind.capitalize()} {name} is not paused; nothing to resume.")
        return True

    @staticmethod
    def _actor(options: dict[str, Any]) -> Any:
        """Who acts: ``--as`` (default: the OS user), as the Django user of that name if any."""
        name = options["actor"] if options["actor"] is not None else operator_name()
        return audit.resolve(name)

    @staticmethod
    def _pause_target(options: dict[str, Any]) -> tuple[str, str]:
        queue, job_type = options["queue"], options["job_type"]
        if (queue is None) == (job_type is None):
            raise CommandError("name a QUEUE, or a job type with --type (not both)", returncode=2)
        # Checked here, before --as is looked up among the site's users: bad usage is exit 2
        # whatever the database says.
        check = arguments.queue_name if job_type is None else arguments.type_name
        try:
            check(queue if job_type is None else job_type)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        return ("queue", queue) if job_type is None else ("type", job_type)

    def _progress(self, total: int) -> Any:
        def report(done: int) -> None:
            self.stderr.write(f"  {done}/{total}")

        return report

    def _prune(self, rest: list[str]) -> None:
        command = load_command_class("jobqueue", "prunejobs")
        if getattr(self, "_called_from_command_line", False):
            # "usage: manage.py jobqueue prune", not prunejobs: the words the operator typed.
            command.run_from_argv([sys.argv[0], "jobqueue prune", *rest])
        else:
            call_command(command, *rest, stdout=self.stdout._out, stderr=self.stderr._out)

    def _json(self, value: Any) -> None:
        self.stdout.write(render.to_json(value))


def _criteria(options: dict[str, Any]) -> JobFilter:
    return JobFilter(
        queue=options["queue"],
        state=options["state"],
        job_type=options["type"],
        tenant=options["tenant"],
    )


def _unreachable(alias: str, exc: DatabaseError) -> str:
    """Return the message for a queue database that failed us, by its kind (``failures.py``).

    ``the queue database 'default' is not migrated (run manage.py migrate): relation ...``.
    """
    return f"the queue {classify(exc, alias).describe()}"

"""``manage.py rundemo``: place orders, run workers until every job is done, and report.

    python manage.py rundemo --orders 200 --processes 2 --concurrency 8 --timeout 300

Exits 0 when every job the run enqueued finished and every order got its receipt, 1 otherwise.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...demo import (
    Outcome,
    WorkerPool,
    all_finished,
    collect_outcome,
    count_other_live_jobs,
    count_states,
    eml_files,
    progress_line,
    receipts_for,
)
from ...jobs import charge_partner, send_receipt
from ...services import place_random_orders
from ..arguments import positive_float, positive_int

#: Seconds between progress lines.
PROGRESS_INTERVAL_S = 1.0


class Command(BaseCommand):
    """Run the shop end to end: orders in, receipts and charges out, through the job queue."""

    help = (
        "Migrate, place N orders, run worker processes until all their jobs finish (or the "
        "timeout passes), stop the workers with SIGTERM and print a summary."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """Add the size of the run and of the worker pool."""
        parser.add_argument(
            "--orders",
            type=positive_int,
            default=200,
            help="Orders to place (default 200); each enqueues two jobs.",
        )
        parser.add_argument(
            "--processes",
            type=positive_int,
            default=2,
            help="Worker processes to start (default 2).",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=8,
            help="Job slots per worker process (default 8).",
        )
        parser.add_argument(
            "--timeout",
            type=positive_float,
            default=300.0,
            help="Give up after this many seconds of work (default 300).",
        )
        parser.add_argument(
            "--grace",
            type=positive_float,
            default=10.0,
            help="Seconds workers get to finish running jobs on SIGTERM (default 10).",
        )
        parser.add_argument(
            "--seed",
            type=int,
            default=None,
            help="Seed for the orders' customers, items and quantities.",
        )

    def handle(
        self,
        *args: Any,
        orders: int,
        processes: int,
        concurrency: int,
        timeout: float,
        grace: float,
        seed: int | None,
        verbosity: int,
        **options: Any,
    ) -> None:
        """Run the demo; raise CommandError (exit status 1) if it did not complete."""
        if verbosity < 2:
            # The workers log to their files; this process would only repeat every enqueue.
            logging.getLogger("jobqueue").setLevel(logging.WARNING)
        call_command("migrate", verbosity=0, interactive=False)
        from django.db import connection

        db = connection.settings_dict
        where = db["NAME"] if connection.vendor == "sqlite" else f"{db['HOST']}/{db['NAME']}"
        self.stdout.write(
            f"Database: {connection.vendor} ({where}); set DATABASE_URL to use another. "
            "The stand-in payment partner fails on purpose (refusals, lost answers, declined "
            "cards), so some jobs retry and a few end dead: that is the point of the demo."
        )

        email_dir = Path(settings.SHOP_EMAIL_DIR)
        eml_before = eml_files(email_dir)
        started = time.monotonic()
        placed = place_random_orders(orders, seed=seed)
        placing_s = time.monotonic() - started
        job_ids = [job_id for p in placed for job_id in p.job_ids]
        self.stdout.write(
            f"Placed {len(placed)} orders in {placing_s:.1f} s: {len(job_ids)} jobs "
            f"({send_receipt.name} on {send_receipt.queue!r}, "
            f"{charge_partner.name} on {charge_partner.queue!r})."
        )

        queues = sorted({send_receipt.queue, charge_partner.queue})
        backlog = count_other_live_jobs(queues, exclude=job_ids)
        if backlog:
            self.stdout.write(
                f"Note: {backlog} unfinished jobs from earlier runs wait on {', '.join(queues)}; "
                "the workers run them too, so this run takes longer."
            )
        pool = WorkerPool(
            project_root=Path(settings.PROJECT_ROOT),
            log_dir=Path(settings.SHOP_LOG_DIR),
            queues=queues,
            concurrency=concurrency,
            grace_s=grace,
        )
        worker_start = time.monotonic()
        # A SIGTERM (from a CI runner, say) stops the demo the way Ctrl-C does, so the workers
        # are stopped too instead of being left running as orphans.
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            pool.start(processes)
            self.stdout.write(
                f"Started {processes} worker processes x {concurrency} slots; logs: "
                + ", ".join(_display(path) for path in pool.log_paths)
            )
            try:
                done = self._watch(pool, job_ids, worker_start, timeout)
            except KeyboardInterrupt:
                self.stderr.write("Interrupted.")
                done = False
            work_s = time.monotonic() - worker_start
        finally:
            self.stdout.write("Stopping workers (SIGTERM)...")
            exit_codes = pool.stop()
            signal.signal(signal.SIGTERM, previous)

        outcome = collect_outcome(
            job_ids=job_ids,
            order_ids=[p.order.pk for p in placed],
            charge_job_ids=[p.charge_job_id for p in placed],
        )
        receipts = receipts_for(eml_files(email_dir) - eml_before, [p.order.pk for p in placed])
        self._report(
            outcome,
            orders=len(placed),
            receipts=receipts,
            email_dir=email_dir,
            work_s=work_s,
            exit_codes=exit_codes,
            pool=pool,
        )
        problems = []
        if not done or outcome.finished < outcome.jobs:
            problems.append(f"{outcome.jobs - outcome.finished} jobs did not finish")
        if outcome.orders_with_receipt < len(placed):
            problems.append(f"{len(placed) - outcome.orders_with_receipt} orders got no receipt")
        if problems:
            raise CommandError("demo incomplete: " + "; ".join(problems))
        self.stdout.write(
            self.style.SUCCESS("Demo complete: every job finished, every order has its receipt.")
        )

    def _watch(self, pool: WorkerPool, job_ids: list[int], started: float, timeout: float) -> bool:
        """Print progress until the jobs finish, the timeout passes or every worker exits.

        Returns:
            True when every job finished.
        """
        while True:
            counts = count_states(job_ids)
            elapsed = time.monotonic() - started
            self.stdout.write(progress_line(elapsed, counts))
            if all_finished(counts, len(job_ids)):
                return True
            if elapsed >= timeout:
                self.stderr.write(f"Timed out after {timeout:g} s.")
                return False
            if pool.running() == 0:
                self.stderr.write("Every worker process exited; see the logs.")
                return False
            time.sleep(PROGRESS_INTERVAL_S)

    def _report(
        self,
        outcome: Outcome,
        *,
        orders: int,
        receipts: int,
        email_dir: Path,
        work_s: float,
        exit_codes: list[int],
        pool: WorkerPool,
    ) -> None:
        """Print the summary table."""
        states = outcome.states
        dead = states["dead"]
        reasons = ", ".join(f"{reason} {n}" for reason, n in outcome.dead_reasons.most_common())
        unfinished = outcome.jobs - outcome.finished
        rate = outcome.finished / work_s if work_s > 0 else 0.0
        rows = [
            ("Orders placed", f"{orders}"),
            (
                "Jobs",
                f"{outcome.jobs}: succeeded {states['succeeded']}, dead {dead}, "
                f"cancelled {states['cancelled']}, unfinished {unfinished}",
            ),
            (
                "Jobs that retried",
                f"{outcome.retried} (more than one attempt, or an error recorded)",
            ),
            ("Dead", f"{dead}" + (f" ({reasons})" if reasons else "")),
            (
                "Receipts written",
                f"{receipts} .eml files for this run's orders in "
                f"{_display(email_dir)}; orders marked sent "
                f"{outcome.orders_with_receipt}/{orders}",
            ),
            (
                "Orders charged",
                f"{outcome.orders_charged}/{orders}; partner charges "
                f"{outcome.partner_charges}, repeated requests answered from "
                f"the idempotency key {outcome.partner_replays}",
            ),
            (
                "Charged, not marked",
                f"{outcome.partner_charges - outcome.orders_charged} (the "
                "partner took the money but the job lost its answer; the "
                "next attempt, or an operator retry of a dead job, marks "
                "the order)",
            ),
            ("Elapsed", f"{work_s:.1f} s with workers, {rate:.1f} jobs/s"),
            ("Worker exit codes", ", ".join(str(code) for code in exit_codes)),
            ("Worker logs", ", ".join(_display(path) for path in pool.log_paths)),
        ]
        width = max(len(label) for label, _ in rows)
        self.stdout.write("")
        for label, value in rows:
            self.stdout.write(f"{label:<{width}}  {value}")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _display(path: Path) -> str:
    """Return ``path`` relative to the working directory when it is below it."""
    resolved = Path(path).resolve()
    return os.path.relpath(resolved) if resolved.is_relative_to(Path.cwd()) else str(resolved)

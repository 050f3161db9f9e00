"""The parts of ``rundemo``: a pool of worker processes, and counting what the jobs did."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import IO

from django.db.models import Count

from jobqueue.models import Job
from jobqueue.states import FINISHED, JobState

from .models import Order, PartnerCharge

#: Ids per ``IN (...)`` query: well under SQLite's limit on bound parameters.
CHUNK_SIZE = 2000
#: Finds the order id at the end of a receipt's subject.
RECEIPT_SUBJECT_ORDER = re.compile(r"order #(\d+)$")
#: States in the order a progress line lists them.
STATE_ORDER = (
    JobState.READY,
    JobState.SCHEDULED,
    JobState.LEASED,
    JobState.SUCCEEDED,
    JobState.DEAD,
    JobState.CANCELLED,
)


@dataclass(slots=True)
class WorkerPool:
    """``manage.py runworkers`` subprocesses, each logging to its own file.

    Args:
        project_root: the directory holding ``manage.py``; the workers' working directory.
        log_dir: where ``worker-<n>.log`` files go.
        queues: the queues the workers serve.
        concurrency: job slots per worker process.
        grace_s: how long a worker may finish running jobs after SIGTERM, seconds.
    """

    project_root: Path
    log_dir: Path
    queues: Sequence[str]
    concurrency: int
    grace_s: float
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    log_paths: list[Path] = field(default_factory=list)
    _logs: list[IO[bytes]] = field(default_factory=list)

    def start(self, count: int) -> None:
        """Start ``count`` worker processes with this process's environment."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Logs of an earlier, larger pool would pass for this run's.
        for stale in self.log_dir.glob("worker-*.log"):
            stale.unlink()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [
            sys.executable,
            "manage.py",
            "runworkers",
            "--queues",
            ",".join(self.queues),
            "--concurrency",
            str(self.concurrency),
            "--grace",
            f"{self.grace_s:g}",
        ]
        for n in range(1, count + 1):
            path = self.log_dir / f"worker-{n}.log"
            log = path.open("wb")
            self._logs.append(log)
            self.log_paths.append(path)
            self.processes.append(
                subprocess.Popen(
                    command,
                    cwd=self.project_root,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def running(self) -> int:
        """Return how many workers are still running."""
        return sum(process.poll() is None for process in self.processes)

    def stop(self) -> list[int]:
        """SIGTERM every worker, wait for them to drain, and kill any that outstay the grace.

        Returns:
            The workers' exit codes (negative: killed by that signal).
        """
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        # The grace covers running jobs; the rest is for releasing leases and closing up.
        deadline = time.monotonic() + self.grace_s + 15
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in self._logs:
            log.close()
        return [process.returncode for process in self.processes]


def chunks(ids: Sequence[int], size: int = CHUNK_SIZE) -> Iterator[Sequence[int]]:
    """Yield ``ids`` in slices of at most ``size``."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def count_states(job_ids: Sequence[int]) -> Counter[str]:
    """Return how many of these jobs are in each state."""
    counts: Counter[str] = Counter()
    for chunk in chunks(job_ids):
        rows = Job.objects.filter(id__in=chunk).values("state").annotate(n=Count("id"))
        counts.update({row["state"]: row["n"] for row in rows})
    return counts


def all_finished(counts: Counter[str], total: int) -> bool:
    """Return True when every one of ``total`` jobs is succeeded, dead or cancelled."""
    return sum(counts[state] for state in FINISHED) >= total


def progress_line(elapsed_s: float, counts: Counter[str]) -> str:
    """Return ``t=3s  ready 120  scheduled 10  leased 8  succeeded 250  dead 2``."""
    parts = [f"t={elapsed_s:.0f}s"]
    for state in STATE_ORDER:
        if state != JobState.CANCELLED or counts[state]:
            parts.append(f"{state.value} {counts[state]}")
    return "  ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a demo run's jobs did.

    Attributes:
        jobs: how many jobs the run enqueued.
        states: jobs per state.
        retried: jobs that needed more than one attempt or recorded an error.
        dead_reasons: dead jobs per reason.
        orders_with_receipt: orders whose receipt job marked them sent.
        orders_charged: orders the charge job marked charged.
        partner_charges: charges the partner made for this run's idempotency keys.
        partner_replays: requests the partner answered from an idempotency key it knew.
    """

    jobs: int
    states: Counter[str]
    retried: int
    dead_reasons: Counter[str]
    orders_with_receipt: int
    orders_charged: int
    partner_charges: int
    partner_replays: int

    @property
    def finished(self) -> int:
        """Return how many jobs are succeeded, dead or cancelled."""
        return sum(self.states[state] for state in FINISHED)


def collect_outcome(
    *, job_ids: Sequence[int], order_ids: Sequence[int], charge_job_ids: Iterable[int]
) -> Outcome:
    """Read the final state of a run's jobs, orders and partner charges."""
    states: Counter[str] = Counter()
    dead_reasons: Counter[str] = Counter()
    retried = 0
    for chunk in chunks(job_ids):
        for state, attempts, errors, dead_reason in Job.objects.filter(id__in=chunk).values_list(
            "state", "attempts", "errors", "dead_reason"
        ):
            states[state] += 1
            retried += attempts > 1 or bool(errors)
            if state == JobState.DEAD:
                dead_reasons[dead_reason or "unknown"] += 1
    with_receipt = charged = 0
    for chunk in chunks(order_ids):
        orders = Order.objects.filter(id__in=chunk)
        with_receipt += orders.filter(receipt_sent_at__isnull=False).count()
        charged += orders.filter(charged_at__isnull=False).count()
    keys = [str(job_id) for job_id in charge_job_ids]
    charges = replays = 0
    for chunk in chunks(keys):
        for requests in PartnerCharge.objects.filter(idempotency_key__in=chunk).values_list(
            "requests", flat=True
        ):
            charges += 1
            replays += requests - 1
    return Outcome(
        jobs=len(job_ids),
        states=states,
        retried=retried,
        dead_reasons=dead_reasons,
        orders_with_receipt=with_receipt,
        orders_charged=charged,
        partner_charges=charges,
        partner_replays=replays,
    )


def eml_files(folder: Path) -> set[Path]:
    """Return the ``.eml`` files in ``folder`` (none if it does not exist)."""
    return set(folder.glob("*.eml")) if folder.is_dir() else set()


def receipts_for(paths: Iterable[Path], order_ids: Iterable[int]) -> int:
    """Return how many of these ``.eml`` files are receipts for the given orders.

    A receipt's subject ends in ``order #<id>`` (see ``jobs.send_receipt``).
    """
    wanted = set(order_ids)
    parser = BytesHeaderParser()
    found = 0
    for path in paths:
        with path.open("rb") as fh:
            subject = str(parser.parse(fh).get("Subject", ""))
        match = RECEIPT_SUBJECT_ORDER.search(subject)
        found += bool(match) and int(match.group(1)) in wanted
    return found


def count_other_live_jobs(queues: Sequence[str], exclude: Sequence[int]) -> int:
    """Return how many unfinished jobs on ``queues`` are not among ``exclude``."""
    live = (
        Job.objects.filter(queue__in=queues)
        .exclude(state__in=FINISHED)
        .values_list("id", flat=True)
    )
    return len(set(live) - set(exclude))

"""``manage.py prunejobs``: delete finished jobs older than a given age. Parsing and wiring only."""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from jobqueue.maintenance.pruning import (
    DEFAULT_PRUNE_BATCH_SIZE,
    count_prunable,
    prune_jobs,
    prune_rollups,
    record_prune,
)
from jobqueue.management.arguments import in_range, text_arg
from jobqueue.ops.where import UnknownDatabase, report_aliases
from jobqueue.settings import ranges as limits
from jobqueue.settings.conf import RETENTION_STATES, get_settings

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def duration(text: str) -> float:
    """Parse ``7d``, ``12h``, ``30m``, ``90s``, ``2w`` or a sum like ``1d12h`` into seconds."""
    value = text.strip().lower()
    if not _DURATION.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"expected a duration like 7d, 12h, 30m, 90s or 1d12h, got {text!r}"
        )
    seconds = sum(float(n) * UNITS[unit] for n, unit in _PART.findall(value))
    try:
        return limits.check(limits.FLAGS["--older-than"], seconds)
    except ValueError:
        limit = limits.RANGES[limits.FLAGS["--older-than"]]
        raise argparse.ArgumentTypeError(f"expected {limit.describe()}, got {text!r}") from None


def finished_states(text: str) -> list[str]:
    """Parse ``succeeded,cancelled`` into finished states, refusing live ones."""
    names = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated states like 'succeeded,cancelled', got {text!r}"
        )
    bad = [name for name in names if name not in RETENTION_STATES]
    if bad:
        raise argparse.ArgumentTypeError(
            f"can prune only {', '.join(RETENTION_STATES)} jobs, got {', '.join(map(repr, bad))}"
        )
    return list(dict.fromkeys(names))


def describe(seconds: float) -> str:
    """Return ``seconds`` the way --older-than takes it (``7d``, ``36h``, ``90s``)."""
    for unit in ("w", "d", "h", "m"):
        if seconds and seconds % UNITS[unit] == 0:
            return f"{seconds / UNITS[unit]:.0f}{unit}"
    return f"{seconds:g}s"


class Command(BaseCommand):
    help = (
        "Delete finished jobs that finished longer ago than --older-than (default: the "
        "JOBQUEUE['RETENTION'] setting per state), in bounded batches. Live jobs are never "
        "deleted."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--older-than",
            type=duration,
            default=None,
            metavar="AGE",
            help="age such as 7d, 12h, 30m or 1d12h (default: each state's RETENTION)",
        )
        parser.add_argument(
            "--state",
            type=finished_states,
            default=None,
            metavar="STATES",
            help="comma-separated finished states: succeeded, cancelled, dead (default: "
            "succeeded,cancelled with --older-than; every state with a retention without it)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
        )
        parser.add_argument(
            "--batch-size",
            type=in_range("--batch-size"),
            default=DEFAULT_PRUNE_BATCH_SIZE,
            help=f"rows deleted per statement (default {DEFAULT_PRUNE_BATCH_SIZE})",
        )
        parser.add_argument(
            "--database",
            type=text_arg,
            default=None,
            metavar="ALIAS",
            help="one database alias (default: every queue database, one after the other)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            aliases = report_aliases(options["database"])
        except UnknownDatabase as exc:
            raise CommandError(f"--database {exc}") from None
        plan = self._plan(options["older_than"], options["state"])
        if not plan:
            self.stdout.write("Nothing to prune: no state has a retention (RETENTION is None).")
            return
        for using in aliases:
            if len(aliases) > 1:
                self.stdout.write(f"Queue database {using}:")
            self._prune(using, plan, options)

    def _prune(self, using: str, plan: list[tuple[list[str], float]], options: Any) -> None:
        """Prune one queue database by ``plan`` and report what went."""
        total = 0
        started = time.monotonic()
        for states, seconds in plan:
            label = "/".join(states)
            if options["dry_run"]:
                n = count_prunable(states, seconds, using=using)
                self.stdout.write(
                    f"Would delete {n} {label} job(s) finished more than {describe(seconds)} ago."
                )
            else:
                n = prune_jobs(
                    states,
                    seconds,
                    batch_size=options["batch_size"],
                    using=using,
                    on_batch=self._progress if options["verbosity"] > 1 else None,
                )
                self.stdout.write(
                    f"Deleted {n} {label} job(s) finished more than {describe(seconds)} ago."
                )
            total += n
        if len(plan) > 1:
            verb = "Would delete" if options["dry_run"] else "Deleted"
            self.stdout.write(f"{verb} {total} job(s) in all.")
        if options["older_than"] is None and not options["dry_run"]:
            # By its own setting, as the worker's pruner does: the rollup is not jobs.
            rows = prune_rollups(using=using)
            keep = describe(get_settings().rollup_retention_seconds)
            self.stdout.write(f"Deleted {rows} rollup row(s) of minutes more than {keep} ago.")
        if not options["dry_run"]:
            record_prune(time.monotonic() - started, using=using)

    def _plan(
        self, older_than: float | None, states: list[str] | None
    ) -> list[tuple[list[str], float]]:
        if older_than is not None:
            return [(states or ["succeeded", "cancelled"], older_than)]
        retention = get_settings().retention_seconds
        chosen = states or list(RETENTION_STATES)
        return [([s], seconds) for s in chosen if (seconds := retention.get(s)) is not None]

    def _progress(self, deleted: int) -> None:
        self.stdout.write(f"  batch: {deleted} deleted")

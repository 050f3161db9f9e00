"""``run_all.py --baseline PATH``: every jobqueue figure for this checkout and another, same run.

Each side is another jobqueue checkout measured by this bench/ directory's code (``measure.py``):
the "current" side is the checkout this file is in, with the Python running ``run_all.py``; the
"baseline" side is PATH, with PATH/.venv/bin/python if it has one (its own dependencies, as
``.ci/setup-venv`` makes them), else the same Python with PATH's sources first on the path.
``measure.py`` refuses to run if ``jobqueue`` is imported from anywhere else. Each side has its
own database (BENCH_DATABASE_URL, and the same name with ``_base`` appended), migrated by its own
code. Runs interleave figure by figure: for each run, each figure is measured once on each side
before the next figure, and which side goes first alternates, so a load spike on the shared
machine lands on both sides rather than on one. (Group by group was tried first: a group of
drains takes minutes on a loaded machine, long enough for the load to change between the sides.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import core
import figures

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Side:
    """One checkout to measure: its name in the table, its root, its Python, its database."""

    name: str
    root: Path
    python: str
    url: str

    def measure(self, *argv: str) -> dict:
        """Run ``measure.py`` with ``argv`` on this side; return the JSON it printed last."""
        env = {
            **os.environ,
            "BENCH_JOBQUEUE_ROOT": str(self.root),
            "BENCH_DATABASE_URL": self.url,
            "PYTHONPATH": str(self.root),
        }
        out = subprocess.run(
            [self.python, str(HERE / "measure.py"), *argv],
            env=env,
            cwd=self.root,
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    def describe(self) -> dict[str, str]:
        """Return the side's root, Python and commit (``+changes`` if jobqueue/ differs from it)."""
        git = ["git", "-C", str(self.root)]
        commit = subprocess.run(
            [*git, "log", "-1", "--format=%h %s"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", "jobqueue"], capture_output=True, text=True
        ).stdout.strip()
        return {
            "root": str(self.root),
            "python": self.python,
            "commit": commit + (" +uncommitted changes in jobqueue/" if dirty else ""),
        }


def sides(baseline: str) -> list[Side]:
    """Return the current side and the baseline side at ``baseline`` (a checkout's root)."""
    root = Path(baseline).resolve()
    if not (root / "jobqueue" / "__init__.py").exists():
        raise SystemExit(f"--baseline {baseline}: no jobqueue/ package there")
    own = root / ".venv" / "bin" / "python"
    return [
        Side("current", HERE.parent, sys.executable, core.URL),
        Side("baseline", root, str(own) if own.exists() else sys.executable, core.URL + "_base"),
    ]


def run(
    args: argparse.Namespace, groups: list[str], step: Callable[[str], None], results: dict
) -> None:
    """Measure ``groups`` on both sides, ``args.runs`` times interleaved; put into ``results``
    what each side was ("sides"), every single result as it comes ("raw", so ``step`` saves a
    run cut short) and, at the end, each side's (median, min, max) per figure."""
    both = sides(args.baseline)
    results["sides"] = {side.name: side.describe() for side in both}
    for side in both:
        step(f"setup, {side.name}")
        side.measure("--setup")
    raw: dict[str, dict[str, list]] = {side.name: {} for side in both}
    results["raw"] = raw
    sized = json.dumps(vars(args))
    keys = [(group, key) for group in groups for key, _, _ in figures.figures(group, args)]
    for number in range(args.runs):
        for index, (group, key) in enumerate(keys):
            order = both if (number + index) % 2 == 0 else both[::-1]
            for side in order:
                step(f"run {number + 1}/{args.runs}: {key}, {side.name}")
                measured = side.measure("--group", group, "--figure", key, "--args", sized)
                raw[side.name].setdefault(key, []).append(measured[key])
    results.update({name: {k: core.summarize(v) for k, v in r.items()} for name, r in raw.items()})


LIMIT_LABELS = {
    "insert": "limit: one INSERT per transaction (jobs/s)",
    "claim": "limit: FOR UPDATE SKIP LOCKED claims of 100 (jobs/s)",
    "ack": "limit: one UPDATE acking 100 (jobs/s)",
    "drain": "limit: claim 100 + ack 100, one connection (jobs/s)",
}


def labels(key: str, args: argparse.Namespace) -> list[str]:
    """Return the table labels of result ``key``'s elements (one per element of a tuple)."""
    if key == "enqueue":
        return ["enqueue, 1 job per transaction (jobs/s)"]
    if key == "enqueue_many":
        return ["enqueue_many of 10,000 (jobs/s)"]
    if key.startswith("drain"):
        n, c = key.removeprefix("drain").split("_c")
        what = f"drain {args.drain_jobs:,} --burst, {n} process{'es' if n != '1' else ''} x {c}"
        return [f"{what} (jobs/s, wall)", f"{what} (jobs/s, span)"]
    pairs = {
        "pickup": "pickup, idle worker, LISTEN/NOTIFY",
        "pickup_poll": "pickup, idle worker, polling 1 s",
        "lateness": "delayed job start - run_at",
        "backlog": f"ready job start, 2 processes draining {args.backlog:,}",
    }
    if key.startswith("claim_"):
        what = f"claim of 10, {int(key.removeprefix('claim_')):,} finished rows"
    else:
        what = pairs[key]
    return [f"{what}: p50 (ms)", f"{what}: p99 (ms)"]


def rows(key: str, value, args: argparse.Namespace) -> list[tuple[str, list[float]]]:
    """Flatten one summarized figure into (label, [median, min, max]) rows."""
    if isinstance(value, dict):
        return [(LIMIT_LABELS[k], list(v)) for k, v in value.items()]
    if isinstance(value[0], list | tuple):
        return [(label, list(v)) for label, v in zip(labels(key, args), value, strict=True)]
    return [(labels(key, args)[0], list(value))]


def print_table(results: dict, args: argparse.Namespace, fmt: Callable[[list], str]) -> None:
    """Print both sides side by side with current / baseline per figure."""
    print(f"\nsame-run before/after: median (min-max) of {args.runs} interleaved run(s) per side")
    for name, side in results["sides"].items():
        print(f"  {name:<8} {side['root']}  ({side['commit']}; {side['python']})")
    print(f"{'figure':<62} {'current':>22} {'baseline':>22} {'cur/base':>8}")
    spreads = []
    for key, value in results["current"].items():
        base = dict(rows(key, results["baseline"][key], args))
        for label, cur in rows(key, value, args):
            ratio = cur[0] / base[label][0] if base[label][0] else float("nan")
            if key == "limit":
                spreads.append(abs(ratio - 1))
            print(f"{label:<62} {fmt(cur):>22} {fmt(base[label]):>22} {ratio:>8.2f}")
    print("cur/base: above 1 is faster for jobs/s, slower for ms.")
    if spreads:
        print(
            f"The limit is the same SQL on both sides: its columns differ by up to "
            f"{max(spreads):.0%} in this run, the noise to read the other ratios against."
        )

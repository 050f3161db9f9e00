"""The figures of each ``run_all.py`` group: which function measures each, with which sizes.

One list serves both modes of ``run_all.py``: the plain run calls each figure ``--runs`` times in
this process; ``--baseline`` calls a group once per side per run through ``measure.py``, so the
two checkouts are measured by the same code with the same sizes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import core
import lateness

#: The groups ``--only`` selects, in the order they run.
GROUPS = ("enqueue", "drain", "pickup", "lateness", "claim", "backlog", "limit", "peers")

#: The groups measured by jobqueue's own code, so ``--baseline`` measures them on both sides.
#: ``limit`` is plain psycopg on a copy of each side's jobs table: what differs between its two
#: columns is the noise of the run (and any schema change), which makes it the yardstick.
SIDED = ("limit", "enqueue", "drain", "pickup", "lateness", "claim", "backlog")

Figure = tuple[str, Callable, tuple]


def bench_delayed(jobs: int, spread_s: float) -> tuple[float, float]:
    """Return (p50, p99) ms of start - run_at for delayed jobs into one idle worker."""
    core.truncate()
    values = lateness.bench_delayed(jobs, 1.0, spread_s=spread_s)
    return lateness.percentile(values, 50), lateness.percentile(values, 99)


def figures(group: str, args: argparse.Namespace) -> list[Figure]:
    """Return the figures of ``group`` as (result key, function, arguments), sized by ``args``
    (``run_all.py``'s options)."""
    if group == "limit":
        return [("limit", core.raw_limit, (args.drain_jobs, args.enqueue_jobs))]
    if group == "enqueue":
        return [
            ("enqueue", core.bench_enqueue, (args.enqueue_jobs,)),
            ("enqueue_many", core.bench_enqueue_many, (10_000,)),
        ]
    if group == "drain":
        return [
            (f"drain{n}_c{c}", core.bench_drain, (args.drain_jobs, n, c))
            for c in concurrencies(args)
            for n in (1, 2)
        ]
    if group == "pickup":
        return [
            ("pickup", core.bench_pickup, (args.pickup_samples, 0.01)),
            ("pickup_poll", core.bench_pickup, (100, 0.01, json.dumps({"LISTEN_NOTIFY": False}))),
        ]
    if group == "lateness":
        return [("lateness", bench_delayed, (args.delayed_jobs, 10.0))]
    if group == "claim":
        return [
            (f"claim_{h}", core.bench_claim_latency, (h,))
            for h in (int(h) for h in args.history.split(","))
        ]
    if group == "backlog":
        return [("backlog", core.bench_backlog_latency, (args.backlog, 100, 0.05))]
    raise ValueError(f"group {group!r} has no jobqueue figures")


def concurrencies(args: argparse.Namespace) -> list[int]:
    """Return the ``--concurrency`` values of the drains (0: none given, the default); the first
    is compared with the peers."""
    return [0 if c == "default" else int(c) for c in args.drain_concurrency.split(",")]

"""What the rollup costs the completer: finish_many with and without the rollup upsert.

    .venv/bin/python bench/rollup_cost.py [--jobs 20000] [--batch 100] [--rounds 3]

Recreates ROLLUP_BENCH_DATABASE_URL (default .../jobqueue_rollup_bench). Each round, for each
variant in turn (interleaved, so the load of the machine falls on both alike): insert --jobs
ready no-op jobs, then drain them as the completer does, a claim of --batch jobs then one
``finish_many`` of their succeeded outcomes, timing only the ``finish_many`` statements.
"without" runs the statement as it was before the rollup (``finish_many.sql`` up to its
RETURNING, the text kept below), "with" the store's own. Prints per variant the median over
rounds of: ms per finish_many pass, microseconds per job, and jobs/s of the drain.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _common import bench_env, recreate_database

URL = os.environ.get(
    "ROLLUP_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_rollup_bench"
)
ENV = bench_env(URL)


def without_rollup(text: str) -> str:
    """Return finish_many.sql without its rollup: the UPDATE of its first CTE, alone."""
    update = text[text.index("UPDATE jobqueue_job AS j") : text.index("), observed AS")]
    return update[: update.index("RETURNING")] + "RETURNING j.id, j.state\n"


def drain(store, jobs: int, batch: int) -> tuple[float, float, int]:
    """Claim and finish ``jobs`` in batches; return (finish seconds, drain seconds, passes)."""
    from jobqueue.retries import RunOutcome

    finish_s = 0.0
    passes = 0
    start = time.perf_counter()
    while True:
        held = store.claim(["bench"], "bench", batch, 60.0)
        if not held:
            break
        outcomes = [
            RunOutcome(job_id=j.id, lease_token=j.lease_token, state="succeeded") for j in held
        ]
        t0 = time.perf_counter()
        recorded = store.finish_many(outcomes)
        finish_s += time.perf_counter() - t0
        assert len(recorded) == len(held)
        passes += 1
    return finish_s, time.perf_counter() - start, passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    recreate_database(URL, ENV)
    import django

    django.setup()
    import core

    from jobqueue.store.postgres import PostgresStore
    from jobqueue.store.postgres import db as postgres

    rolled = postgres.sql("finish_many")
    plain = without_rollup(rolled)
    texts = {"without": plain, "with": rolled}
    original = postgres.sql
    store = PostgresStore()
    results: dict[str, list[tuple[float, float, int]]] = {k: [] for k in texts}
    for _ in range(args.rounds):
        for variant, text in texts.items():
            postgres.sql = lambda name, text=text: text if name == "finish_many" else original(name)  # type: ignore[assignment]
            core.sql("DELETE FROM jobqueue_job")
            core.bulk_ready(args.jobs)
            results[variant].append(drain(store, args.jobs, args.batch))
    postgres.sql = original  # type: ignore[assignment]
    for variant, runs in results.items():
        per_pass = statistics.median(f / p * 1000 for f, _, p in runs)
        per_job = statistics.median(f / args.jobs * 1e6 for f, _, _ in runs)
        rate = statistics.median(args.jobs / d for _, d, _ in runs)
        print(
            f"{variant:>8} rollup: finish_many {per_pass:.2f} ms/pass of {args.batch}, "
            f"{per_job:.1f} us/job; drain {rate:,.0f} jobs/s (median of {args.rounds})"
        )


if __name__ == "__main__":
    main()

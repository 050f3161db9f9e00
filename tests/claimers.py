"""Contention helper: one process whose threads claim from a queue until it is empty.

Run by tests/process/test_worker.py as::

    python tests/claimers.py QUEUE --threads 4 --name p0 --sync-dir DIR

with the environment from ``tests.conftest.subprocess_env()`` (test database, settings). Each
thread opens its own connection, then the process writes ``DIR/ready-<name>`` and waits for
``DIR/go``, so that every process starts claiming at the same moment. Each thread then loops
``jobqueue.claim(QUEUE, "<name>-t<n>", BATCH, lease_s=300)`` until a claim returns nothing.

Prints one claimed job id per line on stdout (duplicates included, so the caller can count
them), and a summary on stderr.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("queue")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--name", required=True)
    parser.add_argument("--sync-dir", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    import django

    django.setup()

    from django.db import connection

    import jobqueue

    connected = threading.Barrier(args.threads + 1)
    go = threading.Event()
    claimed: list[list[int]] = [[] for _ in range(args.threads)]
    claims = [0] * args.threads
    failures: list[BaseException] = []

    def claimer(n: int) -> None:
        try:
            connection.ensure_connection()
            connected.wait()
            go.wait()
            while True:
                jobs = jobqueue.claim(args.queue, f"{args.name}-t{n}", args.batch, lease_s=300)
                claims[n] += 1
                if not jobs:
                    return
                claimed[n].extend(job.id for job in jobs)
        except BaseException as exc:  # noqa: BLE001 - reported; the caller fails the test
            failures.append(exc)
            connected.abort()
        finally:
            connection.close()

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(args.threads)]
    for thread in threads:
        thread.start()
    connected.wait(timeout=args.timeout)
    (args.sync_dir / f"ready-{args.name}").touch()
    deadline = time.monotonic() + args.timeout
    while not (args.sync_dir / "go").exists():
        if time.monotonic() > deadline:
            print(f"{args.name}: no go signal within {args.timeout} s", file=sys.stderr)
            return 3
        time.sleep(0.005)
    go.set()
    for thread in threads:
        thread.join()
    if failures:
        print(f"{args.name}: claim failed: {failures[0]!r}", file=sys.stderr)
        return 1
    for ids in claimed:
        for job_id in ids:
            print(job_id)
    print(
        f"{args.name}: {sum(map(len, claimed))} jobs in {sum(claims)} claims "
        f"(per thread: {[len(ids) for ids in claimed]})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

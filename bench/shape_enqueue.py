"""The enqueuer of ``bench/shapes.py``, run as a Django child process.

``python bench/shape_enqueue.py MODE JSON`` enqueues through jobqueue's public API only
(``jobqueue.enqueue`` / ``jobqueue.enqueue_many``) on the database that ``DATABASE_URL`` names,
so the bench works against whatever claim the checkout has; it prints one JSON line (what the
orchestrator needs: ids, enqueue wall times).

Modes:

* ``bulk``: ``{"groups": [{"queue", "type", "payload", "tenants", "n", "key", "limit"}]}``:
  each group's n jobs dealt round robin over ``tenants`` tenant ids (0: tenant ""), in one
  ``enqueue_many`` call (one transaction) for all groups; ``tenant`` names one tenant instead,
  ``delay`` (seconds) holds them back, ``key``/``limit`` give a concurrency key.
* ``each``: ``{"type", "n"}``: n jobs, one ``enqueue`` each (the workers' warm-up).
* ``trickle``: ``{"n", "gap_s", "path"}``: n ``stamp`` jobs, one ``enqueue`` each, ``gap_s``
  apart; prints the wall time taken just before each call.
* ``hot``: ``{"limited_type", "limited", "later_s", "n", "path"}``: ``limited`` jobs of the
  rate-limited type in one ``enqueue_many``, then ``later_s`` later ``n`` stamp jobs one
  ``enqueue`` each; prints the stamp jobs' enqueue wall times.
"""

from __future__ import annotations

import json
import sys
import time

STAMP = "bench.shape_jobs.stamp"


def _bulk(spec: dict) -> dict:
    import jobqueue

    jobs = []
    for group in spec["groups"]:
        tenants = group.get("tenants", 0)
        for i in range(group["n"]):
            one = {
                "queue": group.get("queue", "default"),
                "job_type": group["type"],
                "payload": group.get("payload", {}),
            }
            if tenants:
                one["tenant_id"] = f"t{i % tenants:05d}"
            if group.get("tenant"):
                one["tenant_id"] = group["tenant"]
            if group.get("delay"):
                one["delay"] = group["delay"]
            if group.get("key"):
                one["concurrency_key"] = group["key"]
                one["concurrency_limit"] = group["limit"]
            jobs.append(one)
    ids = jobqueue.enqueue_many(jobs)
    return {"first": min(ids), "last": max(ids)}


def _each(spec: dict) -> dict:
    """``n`` no-op jobs of ``type``, one ``enqueue`` (one transaction) each."""
    import jobqueue

    ids = [jobqueue.enqueue("default", spec["type"], {"i": i}) for i in range(spec["n"])]
    return {"first": min(ids), "last": max(ids)}


def _trickle(spec: dict) -> dict:
    import jobqueue

    sent = {}
    for i in range(spec["n"]):
        key = f"p{i}"
        sent[key] = time.time()
        jobqueue.enqueue("default", STAMP, {"path": spec["path"], "key": key})
        time.sleep(spec["gap_s"])
    return {"sent": sent}


def _hot(spec: dict) -> dict:
    import jobqueue

    jobqueue.enqueue_many(
        [
            {"queue": "default", "job_type": spec["limited_type"], "payload": {"i": i}}
            for i in range(spec["limited"])
        ]
    )
    time.sleep(spec["later_s"])
    sent = {}
    for i in range(spec["n"]):
        key = f"u{i}"
        sent[key] = time.time()
        jobqueue.enqueue("default", STAMP, {"path": spec["path"], "key": key})
    return {"sent": sent}


def main() -> None:
    import django

    django.setup()
    mode, spec = sys.argv[1], json.loads(sys.argv[2])
    result = {"bulk": _bulk, "each": _each, "trickle": _trickle, "hot": _hot}[mode](spec)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

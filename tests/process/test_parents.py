"""Jobs that run after other jobs (issue 19), through real worker processes on PostgreSQL.

* A chain of 3 whose first step dies: the other two end cancelled with a reason naming their
  parent; the operator retries the first (now able to succeed) and the rest run, the last one
  handed the previous step's result.
* Fan-in under concurrency: many children, each after 3 parents, the parents run by 2 worker
  processes at once: every child runs exactly once, never before its last parent succeeded, and
  none is left waiting (no lost release, no double one).
"""

from __future__ import annotations

import json

import pytest
from django.db import transaction

import jobqueue
from jobqueue.models import Job
from tests.conftest import FAST_WORKER_SETTINGS, record_lines, requires_postgres, wait_for
from tests.testapp import jobs

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]


def states(ids: list[int]) -> list[str]:
    found = dict(Job.objects.filter(id__in=ids).values_list("id", "state"))
    return [found[i] for i in ids]


def test_a_chain_whose_parent_dies_is_cancelled_and_runs_after_the_operator_retry(
    workers, tmp_path
):
    path, flag = str(tmp_path / "runs"), str(tmp_path / "flag")
    ids = jobqueue.chain(
        jobs.fail_until_file.step(queue="chain", path=path, flag=flag),
        jobs.record.step(queue="chain", path=path),
        jobs.record_parent_results.step(queue="chain", path=path, takes_parent_results=True),
    )
    first, second, third = ids
    workers.start("--queues", "chain", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: states(ids) == ["dead", "cancelled", "cancelled"], timeout=60)
    rows = {j.id: j for j in Job.objects.filter(id__in=ids)}
    assert rows[second].errors[-1]["message"] == f"parent job #{first} ended dead"
    assert rows[third].errors[-1]["message"] == f"parent job #{second} ended cancelled"
    assert [line[0] for line in record_lines(tmp_path / "runs")] == [str(first)]

    (tmp_path / "flag").touch()
    assert jobqueue.retry(first)
    done = jobqueue.wait(third, timeout=60)
    assert states(ids) == ["succeeded"] * 3
    runs = record_lines(tmp_path / "runs")
    assert [line[0] for line in runs] == [str(i) for i in (first, first, second, third)]
    assert json.loads(runs[-1][3]) == [{"attempt": 1}], "the third step got the second's result"
    assert done.result == {"job": third, "parents": [{"attempt": 1}]}


def test_fan_in_children_are_released_once_when_parents_finish_concurrently(workers, tmp_path):
    groups = 30
    parent_log, child_log = tmp_path / "parents", tmp_path / "children"
    gate = tmp_path / "gate"
    children: dict[int, list[int]] = {}
    with transaction.atomic():
        for _ in range(groups):
            parents = [
                jobqueue.enqueue(
                    "fanin", jobs.wait_for_gate, {"path": str(parent_log), "gate": str(gate)}
                )
                for _ in range(3)
            ]
            child = jobqueue.enqueue("fanin", jobs.record, {"path": str(child_log)}, after=parents)
            children[child] = parents
    assert set(states(list(children))) == {"waiting"}
    for _ in range(2):
        workers.start("--queues", "fanin", "--concurrency", "4", settings=FAST_WORKER_SETTINGS)
    # Both workers hold parents before any finishes: their acks then meet on shared children.
    wait_for(lambda: len({line[2] for line in record_lines(parent_log)}) == 2, timeout=120)
    gate.touch()
    every = [*children, *(p for ps in children.values() for p in ps)]
    wait_for(lambda: set(states(every)) == {"succeeded"}, timeout=180)

    parent_runs = [int(line[0]) for line in record_lines(parent_log) if line[3] == "done"]
    child_runs = [int(line[0]) for line in record_lines(child_log)]
    assert sorted(child_runs) == sorted(children), "a child ran twice or never"
    assert sorted(parent_runs) == sorted(p for ps in children.values() for p in ps)
    rows = {j.id: j for j in Job.objects.filter(id__in=every)}
    for child, parents in children.items():
        last_parent = max(rows[p].finished_at for p in parents)
        assert rows[child].started_at >= last_parent, f"#{child} ran before its last parent"
        assert rows[child].attempts == 1 and rows[child].waiting_for == 0

"""The job insert's column lists: each SQL file's list against the one Python place it is written
(``jobqueue/store/postgres/db.py``, ``jobs.py``; ``jobqueue/store/shared.py``).

The statements stay one file each; these tests keep them and the Python forms in step, so a
column added to one and not the other fails here rather than at run time.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest

from jobqueue.store.interface import NewJob
from jobqueue.store.postgres.db import enqueue_params
from jobqueue.store.postgres.jobs import COPY_COLUMNS, _jobs_json
from jobqueue.store.shared import job_json
from jobqueue.store.sqltext import sql

JOB = NewJob(
    queue="q",
    type="t",
    payload_json='{"a": 1}',
    run_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    dedupe_key="d",
    ordering_key="o",
    concurrency_key="c",
    concurrency_limit=2,
)


def _params(name: str) -> set[str]:
    return set(re.findall(r"%\((\w+)\)s", sql(name)))


def _recordset(name: str) -> list[str]:
    """Return the column names of ``name``'s ``jsonb_to_recordset(...) AS [alias](...)``."""
    match = re.search(r"jsonb_to_recordset\(.*?\)\s+AS\s+\w*\s*\((.*?)\)", sql(name))
    assert match, name
    return [column.split()[0] for column in match.group(1).split(",")]


def test_enqueue_sql_reads_every_enqueue_param() -> None:
    assert _params("enqueue") == set(enqueue_params(JOB))


@pytest.mark.parametrize("name", ["enqueue_plain", "enqueue_in_order"])
def test_single_enqueue_statements_read_enqueue_params(name: str) -> None:
    assert _params(name) <= set(enqueue_params(JOB))


def test_enqueue_child_reads_enqueue_params_and_its_own() -> None:
    own = {"state", "errors", "waiting_for"}
    assert _params("enqueue_child") - own <= set(enqueue_params(JOB))


def test_enqueue_many_json_is_the_recordset() -> None:
    (obj,) = json.loads(_jobs_json([JOB], [7]))
    assert sorted(obj) == sorted(_recordset("enqueue_many"))


def test_relay_json_is_the_recordset() -> None:
    obj = json.loads(job_json(JOB, 7))
    assert sorted(obj) == sorted(_recordset("relay_jobs"))


def test_copy_columns_are_the_copy_statement() -> None:
    match = re.search(r"COPY jobqueue_job \((.*?)\) FROM STDIN", sql("enqueue_copy"))
    assert match
    columns = [column.strip() for column in match.group(1).split(",")]
    assert columns == [name for name, _ in COPY_COLUMNS]

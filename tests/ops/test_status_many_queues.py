"""``manage.py jobqueue status`` past the top queues: a row each for the deepest, the oldest and
the unserved, the rest summed in one row; ``--all`` lists every queue (issue 33 item 2)."""

from __future__ import annotations

import io
import socket
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobqueue.models import Worker
from jobqueue.ops import queues as queue_ops
from tests.factories import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def twelve_queues(monkeypatch):
    """Queues q00..q11: q<i> holds i+1 ready jobs, q00's is the oldest; one worker serves all."""
    monkeypatch.setattr(queue_ops, "TOP_QUEUES", 3)
    now = timezone.now()
    for i in range(12):
        for _ in range(i + 1):
            make_job(queue=f"q{i:02}", run_at=now - timedelta(minutes=30 if i == 0 else 1))
    Worker.objects.create(
        worker_id="all",
        host=socket.gethostname(),
        pid=1,
        queues=["*"],
        concurrency=4,
        heartbeat_interval_s=600,
    )


def status(*args: str) -> list[str]:
    out = io.StringIO()
    try:
        call_command("jobqueue", "status", *args, stdout=out)
    except SystemExit:
        pass
    return out.getvalue().splitlines()


def queue_rows(lines: list[str]) -> dict[str, list[str]]:
    rows = {}
    for line in lines[1:]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return rows


def test_past_the_top_queues_the_rest_are_one_summed_row(twelve_queues):
    rows = queue_rows(status())
    # The 3 deepest (q11, q10, q09) and the 3 oldest (q00 first; then by name among equals).
    shown = {name for name in rows if not name.startswith("_other")}
    assert {"q11", "q10", "q09", "q00"} <= shown
    assert len(shown) <= 6
    other = rows["_other"]
    summed = [i for i in range(12) if f"q{i:02}" not in shown]
    assert other[1:3] == [f"({len(summed)}", "queues)"]
    assert int(other[3]) == sum(i + 1 for i in summed)  # READY, summed


def test_all_lists_every_queue(twelve_queues):
    rows = queue_rows(status("--all"))
    assert sorted(rows) == [f"q{i:02}" for i in range(12)]
    assert rows["q05"][1] == "6"


def test_an_unserved_queue_is_never_summed_away(twelve_queues):
    Worker.objects.filter(worker_id="all").update(queues=[f"q{i:02}" for i in range(11)])
    lines = status()
    rows = queue_rows(lines)
    assert "q11" in rows and "unserved" in " ".join(rows["q11"])
    make_job(queue="zz-unserved")
    rows = queue_rows(status())
    assert "zz-unserved" in rows
    assert any(line.startswith("Unserved: q11, zz-unserved") for line in status())

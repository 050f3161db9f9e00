"""The last prune's duration and time (FIELD-CASES 31): recorded by the pruner, read by metrics.

``record_prune`` keeps one row; ``jobqueue_last_prune_duration_seconds`` and
``jobqueue_last_prune_timestamp_seconds`` read it, and are absent before any prune ran.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from jobqueue.maintenance.pruning import Pruner, record_prune
from jobqueue.metrics import compute
from jobqueue.models import GaugeSnapshot
from jobqueue.models.metrics import LAST_PRUNE
from jobqueue.ops.clock import db_now

pytestmark = pytest.mark.django_db


def samples(text: str, name: str) -> list[float]:
    return [float(line.split()[-1]) for line in text.splitlines() if line.startswith(f"{name} ")]


def test_no_prune_yet_means_no_sample():
    text = compute()
    assert "# TYPE jobqueue_last_prune_duration_seconds gauge" in text
    assert samples(text, "jobqueue_last_prune_duration_seconds") == []
    assert samples(text, "jobqueue_last_prune_timestamp_seconds") == []


def test_a_recorded_prune_is_read_exactly_and_the_last_one_wins():
    record_prune(1.25)
    record_prune(0.5)
    text = compute()
    assert samples(text, "jobqueue_last_prune_duration_seconds") == [0.5]
    [ended] = samples(text, "jobqueue_last_prune_timestamp_seconds")
    assert ended == GaugeSnapshot.objects.get(name=LAST_PRUNE).computed_at.timestamp()
    assert GaugeSnapshot.objects.filter(name=LAST_PRUNE).count() == 1


def test_the_pruner_service_and_prunejobs_record_their_runs():
    before = db_now()
    Pruner().run_once()
    first = GaugeSnapshot.objects.get(name=LAST_PRUNE)
    assert first.computed_at >= before and float(first.body) >= 0.0
    call_command("prunejobs", stdout=StringIO())
    second = GaugeSnapshot.objects.get(name=LAST_PRUNE)
    assert second.computed_at >= first.computed_at and float(second.body) >= 0.0
    assert samples(compute(), "jobqueue_last_prune_duration_seconds") == [float(second.body)]


def test_a_negative_duration_is_refused_and_nothing_written():
    with pytest.raises(ValueError, match="duration_s"):
        record_prune(-1.0)
    assert not GaugeSnapshot.objects.filter(name=LAST_PRUNE).exists()

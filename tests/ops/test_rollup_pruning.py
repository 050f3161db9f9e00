"""Rollup rows go after ROLLUP_RETENTION_SECONDS: by the worker's pruner and by ``prunejobs``.

And the setting is validated like every other: a value out of range names itself.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.maintenance.pruning import Pruner
from jobqueue.models import Rollup
from jobqueue.ops.clock import db_now
from jobqueue.settings.conf import get_settings
from jobqueue.store import get_store

pytestmark = pytest.mark.django_db


def sample_at(*hours_ago: float) -> None:
    now = db_now()
    for hours in hours_ago:
        get_store().sample_depth(now=now - timedelta(hours=hours))


def minutes_left() -> int:
    return Rollup.objects.count()


def test_the_pruner_service_deletes_rollup_rows_past_their_retention():
    sample_at(50, 49, 47, 0)
    assert minutes_left() == 4
    Pruner().run_once()
    assert minutes_left() == 2  # 48 h by default: the 47-hour-old minute stays


def test_prunejobs_deletes_them_by_their_own_setting():
    sample_at(3, 2.5, 0)
    out = StringIO()
    with override_settings(JOBQUEUE={"ROLLUP_RETENTION_SECONDS": 7200}):
        call_command("prunejobs", stdout=out)
    assert "Deleted 2 rollup row(s) of minutes more than" in out.getvalue()
    assert minutes_left() == 1


@pytest.mark.parametrize("value", [60, 91 * 86400, "2d"])
def test_rollup_retention_out_of_range_is_refused(value):
    with override_settings(JOBQUEUE={"ROLLUP_RETENTION_SECONDS": value}):
        with pytest.raises(JobQueueConfigurationError, match="ROLLUP_RETENTION_SECONDS"):
            get_settings()

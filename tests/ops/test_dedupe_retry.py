"""Field case 28 on both stores, without workers: an operator retry never takes a dedupe key a
live job holds, and says which job holds it (``retry`` raises, ``retry_many`` reports)."""

from __future__ import annotations

import pytest
from django.db import transaction

import jobqueue
from jobqueue.errors import DuplicateJob
from jobqueue.models import Job
from jobqueue.states import JobState
from tests.factories import make_job

NOOP = "tests.testapp.jobs.noop"

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"])


@pytest.mark.parametrize("using", ["default", "sqlite"])
def test_retry_and_retry_many_name_the_live_job_holding_the_key(using):
    dead = make_job(JobState.DEAD, using=using, queue="q", dedupe_key="k").id
    cancelled = make_job(JobState.CANCELLED, using=using, queue="q", dedupe_key="j").id
    holder_k = jobqueue.enqueue("q", NOOP, dedupe_key="k", using=using)
    holder_j = jobqueue.enqueue("q", NOOP, dedupe_key="j", using=using)
    free = make_job(JobState.DEAD, using=using, queue="q", dedupe_key="free").id
    before = {i: Job.objects.using(using).filter(id=i).values().get() for i in (dead, cancelled)}
    with transaction.atomic(using=using):
        with pytest.raises(DuplicateJob) as excinfo:
            jobqueue.retry(dead, using=using)
        assert (excinfo.value.queue, excinfo.value.dedupe_key, excinfo.value.existing_id) == (
            "q",
            "k",
            holder_k,
        )
        # The caller's transaction goes on: retry_many reports instead of raising.
        result = jobqueue.retry_many([dead, cancelled, free], using=using)
    assert result.retried == (free,)
    assert result.duplicate == (dead, cancelled)
    assert result.holders == {dead: holder_k, cancelled: holder_j}
    for job_id, row in before.items():
        assert Job.objects.using(using).filter(id=job_id).values().get() == row

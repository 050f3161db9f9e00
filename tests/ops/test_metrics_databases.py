"""The metrics with queues on two databases (``default`` and ``queues2``): every sample of every
queue database, each with a ``database`` label, each family's HELP and TYPE once; ``using=``
names one database (no label, as with one queue database).
"""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import override_settings

from jobqueue import metrics
from jobqueue.ops.exposition import labelled, merge
from jobqueue.states import JobState
from tests.factories import make_job

pytestmark = pytest.mark.django_db(databases=["default", "queues2"])

TWO = {"bulk": ["default", "queues2"]}


@pytest.fixture
def two_databases():
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "QUEUE_DATABASES": TWO}):
        yield


def test_every_sample_of_every_queue_database_is_labelled_with_it(two_databases):
    make_job(queue="bulk")
    for _ in range(2):
        make_job(queue="bulk", using="queues2")
    make_job(JobState.DEAD, queue="bulk", using="queues2")
    text = metrics.collect(max_age_s=0)
    assert 'jobqueue_jobs{database="default",queue="bulk",state="ready"} 1' in text
    assert 'jobqueue_jobs{database="queues2",queue="bulk",state="ready"} 2' in text
    assert 'jobqueue_jobs{database="queues2",queue="bulk",state="dead"} 1' in text
    assert 'jobqueue_jobs{database="default",queue="bulk",state="dead"} 0' in text
    assert 'jobqueue_workers_alive{database="queues2"} 0' in text
    # The outbox's own label names the caller database whose outbox it is: both labels.
    assert 'jobqueue_outbox_up{database="queues2",outbox_database="default"} 1' in text
    assert 'jobqueue_gauges_age_seconds{database="default"} 0' in text
    # Each family once: its HELP and TYPE, then all its samples together.
    names = re.findall(r"^# TYPE (\S+) ", text, re.M)
    assert len(names) == len(set(names)) and "jobqueue_jobs" in names
    samples = [line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"]
    seen = [name for i, name in enumerate(samples) if i == 0 or samples[i - 1] != name]
    assert len(seen) == len(set(seen)), seen  # no family's samples are split
    # Every sample but the process's versions and the scrape's own duration names its database.
    unlabelled = [
        line for line in text.splitlines() if line[:1] != "#" and "{database=" not in line
    ]
    assert [line.split("{")[0].split(" ")[0] for line in unlabelled] == [
        "jobqueue_build_info",
        "jobqueue_scrape_duration_seconds",
    ]


def test_one_named_database_is_read_alone_without_the_label(two_databases):
    make_job(queue="bulk")
    for _ in range(2):
        make_job(queue="bulk", using="queues2")
    text = metrics.collect("queues2", max_age_s=0)
    assert 'jobqueue_jobs{queue="bulk",state="ready"} 2' in text
    assert not re.search(r'[{,]database="', text)


def test_with_one_queue_database_the_series_have_no_database_label():
    make_job(queue="bulk")
    text = metrics.collect(max_age_s=0)
    assert 'jobqueue_jobs{queue="bulk",state="ready"} 1' in text
    assert not re.search(r'[{,]database="', text)


def test_labelled_puts_the_database_first_in_every_kind_of_sample_line():
    assert labelled("jobqueue_up 1", "a") == 'jobqueue_up{database="a"} 1'
    assert labelled('jobqueue_x{queue="q"} 2', "b") == 'jobqueue_x{database="b",queue="q"} 2'
    assert labelled("jobqueue_y{} 3", 'q"2') == 'jobqueue_y{database="q\\"2"} 3'


def test_merge_writes_a_family_seen_on_one_database_only_once():
    one = "# HELP a A.\n# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 2\n"
    two = "# HELP a A.\n# TYPE a gauge\na 3\n"
    assert merge([("x", one), ("y", two)]).splitlines() == [
        "# HELP a A.",
        "# TYPE a gauge",
        'a{database="x"} 1',
        'a{database="y"} 3',
        "# HELP b B.",
        "# TYPE b gauge",
        'b{database="x"} 2',
    ]


def test_promtool_accepts_the_merged_exposition_of_two_databases(two_databases):
    """Issue 31: the merged text (a ``database`` label on each sample, outbox families) is valid."""
    import shutil
    import subprocess

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus; .ci/run does)")
    make_job(queue="bulk")
    make_job(JobState.DEAD, queue="bulk", using="queues2")
    text = metrics.collect(max_age_s=0)
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")

"""Every log line about a job carries ``extra`` fields a JSON formatter renders (issue 17).

The worker runs in-process (``Worker.run_once``, as in ``test_worker.py``); the records are
captured (caplog) and their attributes read, then rendered by ``jobqueue.logging.JSONFormatter``.
The message texts are unchanged: operators and tests grep them.
"""

from __future__ import annotations

import json
import logging
import logging.config
import sys

import pytest
from django.test import override_settings

import jobqueue
from jobqueue.logging import JOB_FIELDS, JSONFormatter, job_extra
from jobqueue.worker.loop import Worker
from jobqueue.worker.runs import Run

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)
both_stores = pytest.mark.parametrize("using", ["default", "sqlite"])

ADD = "tests.testapp.jobs.add"
FAIL = "tests.testapp.jobs.fail"
FAR_BACKOFF = {"BACKOFF": {"policy": "none", "base_seconds": 600, "cap_seconds": 600}}


def run_one(using: str, caplog, job_id: int, level=logging.INFO) -> logging.LogRecord:
    worker = Worker(
        queues=["w"],
        using=using,
        install_signal_handlers=False,
        listen_notify=False,
        worker_id="w-logs-1",
    )
    with caplog.at_level(level, logger="jobqueue"):
        assert worker.run_once() == 1
    [record] = [r for r in caplog.records if getattr(r, "job_id", None) == job_id]
    return record


def fields(record: logging.LogRecord) -> dict:
    return {name: getattr(record, name) for name in JOB_FIELDS if hasattr(record, name)}


@both_stores
def test_the_succeeded_line_carries_the_job_fields(using, caplog):
    job_id = jobqueue.enqueue("w", ADD, {"a": 1, "b": 2}, tenant_id="acme", using=using)
    record = run_one(using, caplog, job_id)
    assert record.getMessage().startswith(f"job {job_id} {ADD} attempt 1/")
    assert " succeeded in " in record.getMessage()
    got = fields(record)
    assert isinstance(got.pop("duration_s"), float)
    assert got == {
        "job_id": job_id,
        "job_type": ADD,
        "queue": "w",
        "tenant_id": "acme",
        "attempt": 1,
        "worker_id": "w-logs-1",
    }


@both_stores
@override_settings(JOBQUEUE=FAR_BACKOFF)
def test_the_failed_line_carries_the_job_fields(using, caplog):
    job_id = jobqueue.enqueue("w", FAIL, {"message": "down"}, max_attempts=3, using=using)
    record = run_one(using, caplog, job_id)
    assert record.levelno == logging.WARNING
    assert "failed in" in record.getMessage() and "retry in" in record.getMessage()
    got = fields(record)
    assert got["duration_s"] >= 0
    assert {k: got[k] for k in ("job_id", "job_type", "queue", "attempt", "worker_id")} == {
        "job_id": job_id,
        "job_type": FAIL,
        "queue": "w",
        "attempt": 1,
        "worker_id": "w-logs-1",
    }
    assert got["tenant_id"] == ""


@both_stores
def test_the_dead_line_carries_the_job_fields(using, caplog):
    job_id = jobqueue.enqueue("w", FAIL, {"message": "gone"}, max_attempts=1, using=using)
    record = run_one(using, caplog, job_id)
    assert record.levelno == logging.ERROR
    assert " dead (" in record.getMessage()
    got = fields(record)
    assert (got["job_id"], got["job_type"], got["attempt"], got["worker_id"]) == (
        job_id,
        FAIL,
        1,
        "w-logs-1",
    )
    assert "duration_s" in got


def test_the_json_formatter_renders_the_job_fields():
    logger = logging.getLogger("jobqueue.test")
    record = logger.makeRecord(
        "jobqueue.worker",
        logging.ERROR,
        __file__,
        1,
        "job %s dead",
        (7,),
        None,
        extra=job_extra(
            job_id=7, job_type="shop.charge", queue="q", worker_id="w1", duration_s=0.5
        ),
    )
    line = JSONFormatter().format(record)
    assert "\n" not in line
    rendered = json.loads(line)
    assert rendered["message"] == "job 7 dead"
    assert (rendered["level"], rendered["logger"]) == ("ERROR", "jobqueue.worker")
    assert {k: rendered[k] for k in ("job_id", "job_type", "queue", "worker_id", "duration_s")} == {
        "job_id": 7,
        "job_type": "shop.charge",
        "queue": "q",
        "worker_id": "w1",
        "duration_s": 0.5,
    }
    assert rendered["time"].endswith("+00:00")
    # Nothing of the LogRecord's own attributes leaks in besides the four keys.
    assert "args" not in rendered and "msg" not in rendered and "levelno" not in rendered


def test_the_json_formatter_renders_a_traceback_and_unjsonable_values():
    try:
        raise ValueError("bad")
    except ValueError:
        record = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "oops", (), sys.exc_info(), extra={"obj": object()}
        )
    rendered = json.loads(JSONFormatter().format(record))
    assert "ValueError: bad" in rendered["exc_info"]
    assert rendered["obj"].startswith("<object object")


def test_the_json_formatter_in_a_logging_config(capsys):
    # The configuration docs/operations.md shows.
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"json": {"()": "jobqueue.logging.JSONFormatter"}},
            "handlers": {"json": {"class": "logging.StreamHandler", "formatter": "json"}},
            "loggers": {"jobqueue.doc-test": {"handlers": ["json"], "level": "INFO"}},
        }
    )
    logger = logging.getLogger("jobqueue.doc-test")
    try:
        logger.info("hello", extra=job_extra(job_id=3))
    finally:
        logger.handlers.clear()  # its stream is capsys's, gone after this test
    rendered = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert (rendered["message"], rendered["job_id"]) == ("hello", 3)


@both_stores
def test_the_succeeded_line_builds_nothing_when_info_is_off(using, caplog, monkeypatch):
    # The hot path: with INFO disabled no extra dict is built for a success.
    built = []
    original = Run.extra
    monkeypatch.setattr(Run, "extra", lambda run: built.append(run) or original(run))
    jobqueue.enqueue("w", ADD, {"a": 1, "b": 2}, using=using)
    worker = Worker(queues=["w"], using=using, install_signal_handlers=False, listen_notify=False)
    with caplog.at_level(logging.WARNING, logger="jobqueue"):
        assert worker.run_once() == 1
    assert worker.stats["succeeded"] == 1
    assert built == []

"""The JOBQUEUE setting, the @job decorator's checks, and the system check that reports both."""

from __future__ import annotations

import math

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from jobqueue.client import job
from jobqueue.errors import JobQueueConfigurationError, UnknownJobType
from jobqueue.registry import JobType, registry, resolve
from jobqueue.retries import Backoff
from jobqueue.settings import conf
from jobqueue.settings.conf import JobQueueSettings, build_settings, get_settings


@job
def conf_handler(order_id):
    return order_id


# -- the JOBQUEUE dict -----------------------------------------------------------------------


def test_no_setting_gives_the_named_defaults():
    assert build_settings(None) == build_settings({}) == JobQueueSettings()
    s = JobQueueSettings()
    assert (s.lease_seconds, s.timeout_seconds, s.max_attempts) == (30.0, 30.0, 8)
    assert s.backoff == Backoff(policy="full", base_seconds=1.0, cap_seconds=3600.0)
    assert (s.poll_interval_seconds, s.max_payload_bytes) == (1.0, 1024 * 1024)
    assert s.queues == ("default",)
    assert s.listen_notify is True
    assert conf.DEFAULT_LEASE_SECONDS == 30.0
    assert conf.DEFAULT_MAX_PAYLOAD_BYTES == 1024 * 1024


def test_valid_values_are_converted():
    s = build_settings(
        {
            "LEASE_SECONDS": 2,
            "TIMEOUT_SECONDS": 5,
            "MAX_ATTEMPTS": 3,
            "BACKOFF": {"policy": "equal", "base_seconds": 2, "cap_seconds": 60},
            "POLL_INTERVAL_SECONDS": 0.2,
            "LISTEN_NOTIFY": False,
            "MAX_PAYLOAD_BYTES": 100,
            "GRACE_SECONDS": 0,
            "REAPER_INTERVAL_SECONDS": 0.5,
            "CONCURRENCY": 4,
            "QUEUES": ["emails:2", "reports:nightly"],
            "TENANT_MAX_RUNNING": 3,
            "TENANT_MAX_RUNNING_OVERRIDES": {"acme": 10, "internal": None},
        }
    )
    assert s == JobQueueSettings(
        lease_seconds=2.0,
        timeout_seconds=5.0,
        max_attempts=3,
        backoff=Backoff(policy="equal", base_seconds=2.0, cap_seconds=60.0),
        poll_interval_seconds=0.2,
        listen_notify=False,
        max_payload_bytes=100,
        grace_seconds=0.0,
        reaper_interval_seconds=0.5,
        concurrency=4,
        queues=("emails", "reports:nightly"),
        queue_weights=(2, 1),
        tenant_max_running=3,
        tenant_max_running_overrides={"acme": 10, "internal": None},
    )
    assert isinstance(s.lease_seconds, float)
    # A partial BACKOFF keeps the defaults for the keys it leaves out.
    assert build_settings({"BACKOFF": {"base_seconds": 10}}).backoff == Backoff(
        policy="full", base_seconds=10.0, cap_seconds=3600.0
    )


def test_unknown_keys_are_an_error_that_names_them():
    with pytest.raises(JobQueueConfigurationError) as excinfo:
        build_settings({"LEASE_SECOND": 3, "BOGUS": 1, "MAX_ATTEMPTS": 2})
    message = str(excinfo.value)
    assert "unknown keys: BOGUS, LEASE_SECOND" in message
    assert "LEASE_SECONDS" in message  # the known keys are listed, to spot the typo
    assert isinstance(excinfo.value, ImproperlyConfigured)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("LEASE_SECONDS", 0),
        ("LEASE_SECONDS", -1),
        ("LEASE_SECONDS", "30"),
        ("LEASE_SECONDS", True),
        ("LEASE_SECONDS", math.nan),
        ("LEASE_SECONDS", math.inf),
        ("LEASE_SECONDS", None),
        ("TIMEOUT_SECONDS", 0),
        ("TIMEOUT_SECONDS", "x"),
        ("MAX_ATTEMPTS", 0),
        ("MAX_ATTEMPTS", 1.5),
        ("MAX_ATTEMPTS", True),
        ("MAX_ATTEMPTS", "8"),
        ("POLL_INTERVAL_SECONDS", 0),
        ("POLL_INTERVAL_SECONDS", -0.1),
        ("LISTEN_NOTIFY", 0),
        ("LISTEN_NOTIFY", "false"),
        ("LISTEN_NOTIFY", None),
        ("MAX_PAYLOAD_BYTES", 0),
        ("MAX_PAYLOAD_BYTES", 1.5),
        ("MAX_PAYLOAD_BYTES", False),
        ("GRACE_SECONDS", -1),
        ("GRACE_SECONDS", math.inf),
        ("REAPER_INTERVAL_SECONDS", 0),
        ("CONCURRENCY", 0),
        ("CONCURRENCY", "4"),
        ("QUEUES", "default"),
        ("QUEUES", []),
        ("QUEUES", ["ok", "bad name"]),
        ("QUEUES", [1]),
        ("QUEUES", None),
        ("QUEUES", ["critical:0", "bulk"]),
        ("QUEUES", ["a:2", "a:3"]),
        ("TENANT_MAX_RUNNING", 0),
        ("TENANT_MAX_RUNNING", "3"),
        ("TENANT_MAX_RUNNING", True),
        ("TENANT_MAX_RUNNING_OVERRIDES", {"acme": 0}),
        ("TENANT_MAX_RUNNING_OVERRIDES", {"acme": "5"}),
        ("TENANT_MAX_RUNNING_OVERRIDES", {7: 5}),
        ("TENANT_MAX_RUNNING_OVERRIDES", [("acme", 5)]),
        ("BACKOFF", "full"),
        ("BACKOFF", None),
    ],
)
def test_bad_values_are_an_error_naming_the_key(key, value):
    with pytest.raises(JobQueueConfigurationError) as excinfo:
        build_settings({key: value})
    assert key in str(excinfo.value)
    # Item-wise settings name the offending item rather than repeating the whole value.
    assert repr(value) in str(excinfo.value) or key in {"QUEUES", "TENANT_MAX_RUNNING_OVERRIDES"}


@pytest.mark.parametrize(
    ("backoff", "words"),
    [
        ({"policy": "linear"}, "'policy'] must be one of none, full, equal, decorrelated"),
        ({"policy": None}, "must be one of"),
        ({"base_seconds": 0}, "JOBQUEUE['BACKOFF']['base_seconds'] must be a number in 0.001.."),
        ({"cap_seconds": -1}, "JOBQUEUE['BACKOFF']['cap_seconds'] must be a number in 0.001.."),
        ({"base_seconds": "1"}, "JOBQUEUE['BACKOFF']['base_seconds'] must be a number"),
        (
            {"base_seconds": 10, "cap_seconds": 5},
            "cap_seconds (5.0) must be >= base_seconds (10.0)",
        ),
        ({"jitter": "full"}, "unknown keys: jitter"),
    ],
)
def test_bad_backoff_is_an_error(backoff, words):
    with pytest.raises(JobQueueConfigurationError) as excinfo:
        build_settings({"BACKOFF": backoff})
    assert words in str(excinfo.value)


def test_retention_and_masked_keys_have_named_defaults():
    s = JobQueueSettings()
    assert s.retention_seconds == {"succeeded": 604800.0, "cancelled": 604800.0, "dead": 2592000.0}
    assert conf.DEFAULT_RETENTION_SECONDS == s.retention_seconds
    assert s.admin_masked_keys == ("password", "token", "secret", "card", "authorization")
    assert conf.DEFAULT_ADMIN_MASKED_KEYS == s.admin_masked_keys


def test_retention_accepts_seconds_timedeltas_and_none_and_keeps_defaults():
    from datetime import timedelta

    s = build_settings({"RETENTION": {"succeeded": 0, "dead": timedelta(days=90)}})
    assert s.retention_seconds == {"succeeded": 0.0, "cancelled": 604800.0, "dead": 7776000.0}
    s = build_settings({"RETENTION": {"cancelled": None}})
    assert s.retention_seconds["cancelled"] is None
    assert s.retention_seconds["succeeded"] == 604800.0


@pytest.mark.parametrize(
    ("retention", "words"),
    [
        ("7d", "must be a dict"),
        ({"ready": 10}, "unknown states: ready"),
        ({"leased": 10, "zombie": 1}, "unknown states: leased, zombie"),
        ({"succeeded": -1}, "JOBQUEUE['RETENTION']['succeeded']"),
        ({"succeeded": "7d"}, "JOBQUEUE['RETENTION']['succeeded']"),
        ({"dead": math.inf}, "JOBQUEUE['RETENTION']['dead']"),
        ({"dead": 10**12}, "must be a number in 0..315360000 seconds, got 1000000000000"),
    ],
)
def test_bad_retention_is_an_error_naming_it(retention, words):
    with pytest.raises(JobQueueConfigurationError) as excinfo:
        build_settings({"RETENTION": retention})
    assert words in str(excinfo.value)


def test_masked_keys_are_lower_cased():
    s = build_settings({"ADMIN_MASKED_KEYS": ["Password", " IBAN "]})
    assert s.admin_masked_keys == ("password", "iban")
    assert build_settings({"ADMIN_MASKED_KEYS": []}).admin_masked_keys == ()


@pytest.mark.parametrize("value", ["password", None, ["ok", ""], ["ok", 3], {"password": 1}])
def test_bad_masked_keys_are_an_error(value):
    with pytest.raises(JobQueueConfigurationError, match="ADMIN_MASKED_KEYS"):
        build_settings({"ADMIN_MASKED_KEYS": value})


def test_the_setting_itself_must_be_a_dict():
    with pytest.raises(JobQueueConfigurationError, match="JOBQUEUE must be a dict, got list"):
        build_settings([("LEASE_SECONDS", 3)])


def test_override_settings_takes_effect_and_is_undone():
    before = get_settings()
    with override_settings(JOBQUEUE={"LEASE_SECONDS": 2, "MAX_ATTEMPTS": 4}):
        assert (get_settings().lease_seconds, get_settings().max_attempts) == (2.0, 4)
        with override_settings(JOBQUEUE={"LEASE_SECONDS": 7}):
            assert (get_settings().lease_seconds, get_settings().max_attempts) == (7.0, 8)
        assert get_settings().lease_seconds == 2.0
    assert get_settings() == before


def test_an_invalid_override_raises_when_read():
    with override_settings(JOBQUEUE={"MAX_ATTEMPTS": 0}):
        with pytest.raises(JobQueueConfigurationError, match="MAX_ATTEMPTS"):
            get_settings()
    get_settings()  # valid again


# -- the @job decorator ----------------------------------------------------------------------


def test_job_name_defaults_to_the_dotted_path():
    assert isinstance(conf_handler, JobType)
    assert conf_handler.name == "tests.configuration.test_conf.conf_handler"
    assert registry()["tests.configuration.test_conf.conf_handler"] is conf_handler
    assert resolve("tests.configuration.test_conf.conf_handler") is conf_handler
    assert conf_handler(order_id=5) == 5  # calling it runs the handler directly
    assert (conf_handler.queue, conf_handler.priority, conf_handler.max_attempts) == (
        "default",
        0,
        None,
    )


def test_resolve_of_an_unknown_type_raises():
    with pytest.raises(UnknownJobType) as excinfo:
        resolve("tests.configuration.test_conf.no_such_handler")
    assert excinfo.value.job_type == "tests.configuration.test_conf.no_such_handler"
    with pytest.raises(UnknownJobType):
        resolve("no_such_module_anywhere.handler")


@pytest.mark.parametrize(
    "option",
    [
        "priority",
        "delay",
        "run_at",
        "queue",
        "using",
        "dedupe_key",
        "max_attempts",
        "timeout_s",
        "tenant_id",
    ],
)
def test_a_handler_parameter_named_like_an_enqueue_option_is_refused(option):
    namespace: dict = {}
    exec(f"def handler(order_id, {option}=None):\n    pass", namespace)
    with pytest.raises(JobQueueConfigurationError) as excinfo:
        job(name=f"tests.configuration.test_conf.clash_{option}")(namespace["handler"])
    assert f"handler parameters {option} collide with enqueue options" in str(excinfo.value)
    assert f"tests.configuration.test_conf.clash_{option}" not in registry()


def test_the_context_parameter_is_not_a_payload_parameter():
    def handler(context, order_id):
        return order_id

    registered = job(name="tests.configuration.test_conf.with_context", takes_context=True)(handler)
    assert registered.takes_context is True

    def clashing(context, delay):
        pass

    with pytest.raises(JobQueueConfigurationError, match="delay"):
        job(name="tests.configuration.test_conf.context_clash", takes_context=True)(clashing)


def test_registering_another_function_under_an_existing_name_is_refused():
    def other(order_id):
        return None

    with pytest.raises(JobQueueConfigurationError) as excinfo:
        job(name="tests.configuration.test_conf.conf_handler")(other)
    assert "already registered by tests.configuration.test_conf.conf_handler" in str(excinfo.value)
    assert registry()["tests.configuration.test_conf.conf_handler"] is conf_handler


def test_registering_the_same_function_again_is_accepted():
    again = job(conf_handler.func)
    assert again.name == "tests.configuration.test_conf.conf_handler"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"priority": 101}, "priority"),
        ({"priority": -101}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"queue": "bad name"}, "queue"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"backoff": {"policy": "linear"}}, "backoff"),
        ({"backoff": {"base_seconds": 5, "cap_seconds": 1}}, "cap_seconds"),
    ],
)
def test_bad_job_defaults_are_refused_at_decoration(options, words):
    def handler():
        pass

    with pytest.raises(JobQueueConfigurationError) as excinfo:
        job(name="tests.configuration.test_conf.bad_defaults", **options)(handler)
    assert "@job for tests.configuration.test_conf.bad_defaults" in str(excinfo.value)
    assert words in str(excinfo.value)
    assert "tests.configuration.test_conf.bad_defaults" not in registry()


def test_job_defaults_are_kept():
    def handler():
        pass

    registered = job(
        name="tests.configuration.test_conf.defaults",
        queue="emails",
        priority=5,
        max_attempts=2,
        timeout_s=9,
        backoff={"policy": "none"},
    )(handler)
    assert (
        registered.queue,
        registered.priority,
        registered.max_attempts,
        registered.timeout_s,
    ) == ("emails", 5, 2, 9)
    assert registered.backoff == Backoff(policy="none", base_seconds=1.0, cap_seconds=3600.0)


# -- the system check ------------------------------------------------------------------------

# The model checks ask each database about its features (JSONField support), so they need access.
check_db = pytest.mark.django_db(databases="__all__")


@check_db
def test_check_passes_with_a_valid_setting():
    with override_settings(JOBQUEUE={"LEASE_SECONDS": 10}):
        call_command("check", verbosity=0)


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ({"BOGUS": 1}, "unknown keys: BOGUS"),
        ({"LEASE_SECONDS": -1}, "LEASE_SECONDS"),
        ({"BACKOFF": {"policy": "linear"}}, "policy"),
    ],
)
@check_db
def test_check_reports_a_bad_setting_as_e001(setting, words):
    with override_settings(JOBQUEUE=setting):
        with pytest.raises(SystemCheckError) as excinfo:
            call_command("check", verbosity=0)
    assert "jobqueue.E001" in str(excinfo.value)
    assert words in str(excinfo.value)

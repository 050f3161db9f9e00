"""Handlers the tests enqueue. Importable by worker subprocesses (autodiscovered as jobs.py)."""

import asyncio
import json
import os
import signal
import threading
import time
import weakref

from django.db import transaction

from jobqueue import job
from jobqueue.errors import PermanentError, RetryAfter
from tests.testapp import hooks, receivers  # noqa: F401  (signal receivers, test hooks)
from tests.testapp.models import StepRun


@job
def noop(**kwargs):
    return None


@job
def add(a, b):
    return a + b


@job(takes_context=True)
def record(context, path, sleep_s=0.0, **kwargs):
    """Append 'job_id attempt pid' to a file, then sleep."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    time.sleep(sleep_s)
    return {"attempt": context.attempt}


#: What leak_memory keeps: never freed, as a leak.
_LEAKED: list[bytearray] = []


@job(takes_context=True)
def leak_memory(context, path, mb=40):
    """Append 'job_id attempt pid', then keep ``mb`` MiB of written memory for good (a leak)."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    _LEAKED.append(bytearray(b"x" * (mb * 1024 * 1024)))  # written: resident, not just mapped
    return len(_LEAKED)


@job(takes_context=True)
def record_until_released(context, path, release, max_s=120.0):
    """Append 'job_id attempt pid', then run until the file ``release`` exists (or ``max_s``).

    For tests that keep a job running for as long as their measured progress needs, instead of
    a number of seconds guessed for an idle machine.
    """
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    deadline = time.monotonic() + max_s
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"attempt": context.attempt, "released": os.path.exists(release)}


@job(takes_context=True)
def sleep_on_first_attempt(context, path, sleep_s):
    """Record the attempt; sleep long on the first attempt only (to be killed mid-job)."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    if context.attempt == 1:
        time.sleep(sleep_s)
    return "done"


@job(takes_context=True)
def kill_own_process(context, path):
    """A poison job: records its attempt, then kills its worker process outright."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
        f.flush()
    os.kill(os.getpid(), signal.SIGKILL)


@job
def fail(message="boom"):
    raise ConnectionError(message)


@job
def fail_echoing(api_token, note=""):
    """Fail with a message that echoes a masked payload value (tests/ops/test_output_safety.py)."""
    raise ValueError(f"login refused for {api_token}{note}")


@job
def fail_permanently(message="no"):
    raise PermanentError(message)


@job
def retry_after(seconds):
    raise RetryAfter(seconds)


@job(takes_context=True)
def wait_for_lease_lost(context, path, max_s=30.0):
    """Record the start, wait to be told to stop, record why (lease_lost / cancel_requested)."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()} start\n")
    if context.wait_for_stop(max_s):
        reason = "lease_lost" if context.lease_lost else "cancel_requested"
        with open(path, "a") as f:
            f.write(f"{context.job_id} {context.attempt} {os.getpid()} {reason}\n")
        return f"stopped early: {reason}"
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()} never_told\n")
    return "ran to the end"


@job(takes_context=True)
def sleep_on_first_run(context, path, sleep_s):
    """Record the run; sleep only if no earlier run of this job is in the file.

    Unlike ``sleep_on_first_attempt`` this tells runs apart by the file, not by the attempt
    number, because a lease released at shutdown gives the attempt back (the rerun is attempt 1
    again).
    """
    try:
        with open(path) as f:
            earlier = sum(1 for line in f if line.split()[0] == str(context.job_id))
    except FileNotFoundError:
        earlier = 0
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    if earlier == 0:
        time.sleep(sleep_s)
    return {"runs_before": earlier}


@job(takes_context=True)
def recorded_work(context, sleep_s=0.0):
    """Write a Run row (job id, attempt, pid), then work for ``sleep_s``."""
    from tests.testapp.models import Run

    Run.objects.create(job_id=context.job_id, attempt=context.attempt, pid=os.getpid())
    time.sleep(sleep_s)


@job(takes_context=True)
def spin_forever(context, path):
    """A runaway: records its start, then never returns (ignores should_stop on purpose)."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    while True:
        time.sleep(0.1)


@job(takes_context=True)
def exit_process(context, path):
    """A poison job: records its attempt, then ends its worker process with os._exit(1)."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
        f.flush()
    os._exit(1)


class UnprintableError(Exception):
    """An exception whose str() itself raises (seen in third-party libraries)."""

    def __str__(self):
        raise RuntimeError("str failed")


@job
def raise_unprintable():
    raise UnprintableError()


@job(takes_context=True)
def hang_forever(context):
    """Never returns and ignores should_stop: a true runaway."""
    while True:
        time.sleep(0.2)


@job(takes_context=True)
def fairness_probe(
    context, path, tenant="", key=None, sleep_s=0.02, fail_first=False, retry_first_s=None
):
    """Append JSON lines for this run's start and end, with the tenant's leased count at start.

    The count is read from the database inside the run, so it is the truth every worker shares:
    it includes this job. ``fail_first`` makes attempt 1 fail after its work (a transient error);
    ``retry_first_s`` makes attempt 1 ask for a retry that many seconds later (``RetryAfter``).
    """
    import json

    from jobqueue.models import Job

    leased = Job.objects.filter(state="leased", tenant_id=tenant).count()
    run = {"id": context.job_id, "attempt": context.attempt, "tenant": tenant, "key": key}

    def write(**fields):
        with open(path, "a") as f:
            f.write(json.dumps({**run, **fields, "pid": os.getpid()}) + "\n")

    write(event="start", at=time.time(), leased=leased)
    time.sleep(sleep_s)
    failed = fail_first and context.attempt == 1
    write(event="end", at=time.time(), ok=not failed)
    if failed:
        raise RuntimeError("transient")
    if retry_first_s is not None and context.attempt == 1:
        raise RetryAfter(retry_first_s)


# -- dependencies (circuit breakers, retry budgets) ----------------------------------------


@job(takes_context=True, dependency="partner")
def call_partner(context, path, down_flag):
    """Stand-in for a call to the dependency "partner": down while ``down_flag`` exists.

    Records ``job_id attempt pid breaker-state`` for every call, so a test can tell that no
    call happened while the breaker was open.
    """
    from jobqueue.models import DependencyBreaker

    state = (
        DependencyBreaker.objects.filter(name="partner").values_list("state", flat=True).first()
        or "none"
    )
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()} {state}\n")
    if os.path.exists(down_flag):
        raise ConnectionError("partner is down")
    return "ok"


@job(dependency="partner")
def partner_rejects():
    raise PermanentError("partner says 400: this request can never succeed")


@job(takes_context=True)
def fail_first_attempt(context, path):
    """Record the call; fail attempt 1 with a connection error, succeed after."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    if context.attempt == 1:
        raise ConnectionError("first attempt fails")
    return context.attempt


@job(takes_context=True)
def wait_for_gate(context, path, gate, max_s=60.0):
    """Record 'job_id attempt pid start', wait until the file ``gate`` exists, record 'done'."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()} start\n")
    deadline = time.monotonic() + max_s
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()} done\n")
    return "done"


@job(takes_context=True)
def leaky(context, path):
    """A handler that leaves a transaction open on its thread's connection (case 29, fault a).

    Turns autocommit off, reads the job table once, records its backend pid, returns without
    committing.
    """
    from django.db import connection

    connection.set_autocommit(False)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM jobqueue_job")
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    with open(path, "a") as f:
        f.write(f"{context.job_id} {backend}\n")
    return "left a transaction open"


# -- handler threads and memory (FIELD-CASES 32, 33) ----------------------------------------------


def handler_threads():
    """Return how many handler threads this process has now."""
    return sum(t.name == "jobqueue-handler" for t in threading.enumerate())


@job(takes_context=True)
def spin_cpu(context, path):
    """A CPU-bound runaway: records ``job_id attempt pid threads``, then computes forever."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()} {handler_threads()}\n")
    n = 0
    while True:
        n = (n * 31 + 7) % 1_000_003


@job(takes_context=True)
def record_threads(context, path, sleep_s=0.0):
    """Record ``job_id attempt pid threads`` (the handler threads alive now), then sleep."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()} {handler_threads()}\n")
    time.sleep(sleep_s)


@job(takes_context=True)
def hold_until_file(context, path, flag, max_s=60.0):
    """Record ``job_id attempt pid``, then wait until ``flag`` exists (at most ``max_s``)."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    deadline = time.monotonic() + max_s
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.05)
    return "released"


#: Weak references to the buffers the handlers below allocate, by the payload's ``key``.
BUFFERS: dict[str, weakref.ref] = {}


class Buffer:
    """A big allocation a test can hold a weak reference to."""

    def __init__(self, mb):
        self.data = bytearray(int(mb * 1_000_000))


def raise_holding_buffer(key, mb, message, chained):
    buffer = Buffer(mb)
    if key:
        BUFFERS[key] = weakref.ref(buffer)
    if not chained:
        raise ValueError(message)
    try:
        raise KeyError("inner")
    except KeyError as exc:
        # A local holding the exception raised from this frame: a reference cycle.
        error = exc
    raise ValueError(message) from error


@job
def fail_holding_buffer(key="", mb=5, message="boom", chained=False):
    """Handler F of FIELD-CASES 32: allocate ``mb`` MB as a local, then raise ValueError."""
    raise_holding_buffer(key, mb, message, chained)


@job
async def fail_holding_buffer_async(key="", mb=5, message="boom", chained=False):
    """F as an ``async def`` handler."""
    await asyncio.sleep(0)
    raise_holding_buffer(key, mb, message, chained)


@job
def hold_buffer(mb=5):
    """Handler S of FIELD-CASES 32: allocate ``mb`` MB as a local and return."""
    buffer = Buffer(mb)
    return len(buffer.data)


@job
def report_rss():
    """Return this worker process's resident set size, bytes (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@job(takes_context=True, timeout_s=600)
def checkpointed_steps(context, steps=200, step_s=0.02):
    """A long job in ``steps`` steps that resumes from its checkpoint (issue 19).

    Each step's effect (a ``StepRun`` row) commits in one transaction with the checkpoint that
    says it is done, so a crash between steps neither loses nor repeats one; progress is reported
    after each step.
    """
    start = (context.checkpoint_state or {}).get("next", 0)
    for step in range(start, steps):
        time.sleep(step_s)
        with transaction.atomic():
            StepRun.objects.create(job_id=context.job_id, step=step, attempt=context.attempt)
            context.checkpoint({"next": step + 1})
        context.progress(step + 1, steps)
    return {"steps": steps, "resumed_at": start}


@job(takes_context=True)
def fail_until_file(context, path, flag):
    """Record the call; end dead (PermanentError) unless the file ``flag`` exists (issue 19)."""
    with open(path, "a") as f:
        f.write(f"{context.job_id} {context.attempt} {os.getpid()}\n")
    if not os.path.exists(flag):
        raise PermanentError(f"{flag} is missing")
    return context.job_id


@job(takes_context=True)
def record_parent_results(context, path, parent_results, **kwargs):
    """Record 'job_id attempt pid <parent_results as JSON>' (issue 19, takes_parent_results)."""
    with open(path, "a") as f:
        results = json.dumps(parent_results, separators=(",", ":"))
        f.write(f"{context.job_id} {context.attempt} {os.getpid()} {results}\n")
    return {"job": context.job_id, "parents": parent_results}


@job
def batch_member(index=0, sleep_s=0.0, fail=False):
    """A batch member (test_batches): sleeps, then succeeds or fails for good."""
    if sleep_s:
        time.sleep(sleep_s)
    if fail:
        raise PermanentError(f"member {index} failed")
    return index


@job
def batch_report(batch, payload):
    """A batch callback (test_batches): returns what it was handed."""
    return {"batch": batch, "payload": payload}


@job
def started_at_wall(**kwargs):
    """Return the wall-clock time (``time.time()``, seconds) at which the handler started.

    ``bench/pickup.py`` reads it as the start of the run (pickup = it - the time ``enqueue``
    was called, both on this machine's clock).
    """
    return time.time()

"""Job types and their registry (type name -> handler); ``@job`` itself is in :mod:`jobqueue.jobs`.

Workers resolve a job's ``type`` through this registry. Handlers register when their module is
imported: the app config imports ``jobs`` modules of installed apps at startup, and
:func:`resolve` imports a dotted type name's module on demand, so a handler defined anywhere is
found as long as its name is its dotted path.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from .arguments import validate_options
from .concurrencyspec import check_declared
from .conf import get_settings
from .errors import (
    InvalidJobOption,
    InvalidPayload,
    JobQueueConfigurationError,
    JobQueueError,
    LeaseLost,
    UnknownJobType,
)
from .payloads import to_json
from .policies import Backoff, parse_backoff
from .ratelimits import Limiter, parse_rate
from .validation import validate_dependency_name

__all__ = [
    "JobContext",
    "JobType",
    "RunRecorder",
    "declare",
    "register",
    "registered",
    "registry",
    "resolve",
]

#: Keyword arguments of ``JobFunction.enqueue`` (``jobqueue.jobs``) that are options, not payload.
ENQUEUE_OPTIONS = frozenset(
    {
        "queue",
        "run_at",
        "delay",
        "priority",
        "dedupe_key",
        "max_attempts",
        "timeout_s",
        "tenant_id",
        "ordering_key",
        "concurrency_key",
        "concurrency_limit",
        "using",
        "after",
        "run_on_parent_failure",
        "takes_parent_results",
    }
)


class RunRecorder(Protocol):
    """Where a run's progress and checkpoints are written: the store (``store/progress.py``)."""

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        """Store progress on the held job; raise ``LeaseLost`` if not held."""

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        """Store a checkpoint on the held job; raise ``LeaseLost`` if not held."""

    def read_checkpoint(self, job_id: int) -> Any:
        """Return the job's last checkpoint, or None."""


#: A checkpoint not read yet (None is a read one: the job has none).
_UNREAD: Any = object()


@dataclass(slots=True, kw_only=True)
class JobContext:
    """What a handler that asked for it (``takes_context=True``) learns about its run.

    Attributes:
        job_id: the job's id. Also its idempotency key: the same on every attempt.
        job_type: the registered type name.
        queue: the queue the job was claimed from.
        attempt: this attempt's number, counting from 1 (attempts count claims).
        max_attempts: attempts the job gets before it is dead-lettered.
        worker_id: the worker running it.
        lease_token: this run's lease token, which fences :meth:`progress` and
            :meth:`checkpoint` (None in a context made by hand, which records nothing).
        recorder: where those go (the worker's store).
    """

    job_id: int
    job_type: str
    queue: str
    attempt: int
    max_attempts: int
    worker_id: str
    #: The run's lease token (None in a context made by hand: it records nothing).
    lease_token: uuid.UUID | None = field(default=None, repr=False)
    #: Where progress and checkpoints go: the worker's store (None: nowhere).
    recorder: RunRecorder | None = field(default=None, repr=False)
    _checkpoint: Any = field(default=_UNREAD, repr=False)
    _lease_lost: bool = field(default=False, repr=False)
    _timed_out: bool = field(default=False, repr=False)
    _cancel_requested: bool = field(default=False, repr=False)
    # Set with any of the three flags, so a handler can wait on "stop" instead of polling.
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def idempotency_key(self) -> str:
        """Return a key that is the same on every attempt of this job: ``str(job_id)``."""
        return str(self.job_id)

    @property
    def lease_lost(self) -> bool:
        """Return True once the worker learned that this job's lease is gone.

        Another worker may run the job now (the reaper or another claim took it); the outcome
        of this run will not be recorded.
        """
        return self._lease_lost

    @property
    def timed_out(self) -> bool:
        """Return True once the run passed its ``timeout_s``.

        The worker has already recorded this attempt as failed (a retry or a dead letter); what
        the handler does from now on is not recorded.
        """
        return self._timed_out

    @property
    def cancel_requested(self) -> bool:
        """Return True once an operator asked to cancel this job while it runs.

        The job ends ``cancelled`` whatever the handler returns, so it should stop now.
        """
        return self._cancel_requested

    @property
    def should_stop(self) -> bool:
        """Return True when the handler should return now: lease lost, timed out, or cancelled.

        A long handler should check it between steps (or block on :meth:`wait_for_stop`).
        """
        return self._stop.is_set()

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Block until :attr:`should_stop` is true, or ``timeout`` seconds pass.

        Use it instead of ``time.sleep`` in a handler that waits, so it wakes at once when it
        is told to stop.

        Returns:
            True if the handler should stop, False if the timeout passed first.
        """
        return self._stop.wait(timeout)

    def progress(self, done: int, total: int | None = None) -> None:
        """Record that ``done`` of ``total`` steps are done.

        Shown by ``jobqueue.status``, the admin's job page and ``manage.py jobqueue show``.
        One fenced write to the job's row per call: report every step of a job with hundreds of
        steps, not every item of a million.

        Args:
            done: steps done, an int >= 0.
            total: steps in all, an int >= ``done``, or None when unknown.

        Raises:
            InvalidJobOption: ``done`` or ``total`` is not such an int; nothing is written.
            LeaseLost: this run no longer holds the job (another attempt may run it); nothing
                is written, and :attr:`should_stop` is now true.
            JobQueueError: the context belongs to no worker (made by hand).
        """
        for name, value in (("done", done), ("total", total)):
            if (value is not None or name == "done") and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise InvalidJobOption(f"progress {name}", f"must be an int >= 0, got {value!r}")
        if total is not None and done > total:
            raise InvalidJobOption("progress done", f"{done} is more than total ({total})")
        recorder, token = self._recording()
        try:
            recorder.record_progress(self.job_id, token, done, total)
        except LeaseLost:
            self.mark_lease_lost()
            raise

    def checkpoint(self, state: Any) -> None:
        """Store ``state`` on the job's row; the next attempt reads it as :attr:`checkpoint_state`.

        Fenced by this run's lease token: once another attempt holds the job (this run is a
        zombie), nothing is written and ``LeaseLost`` is raised. A crash, a lost lease or a
        release at shutdown then resumes from the last checkpoint that was written.

        Args:
            state: a JSON value of at most ``JOBQUEUE["CHECKPOINT_MAX_BYTES"]`` bytes (64 KiB).

        Raises:
            InvalidPayload: not JSON, or over the size limit; nothing is written.
            LeaseLost: this run no longer holds the job; nothing is written, and
                :attr:`should_stop` is now true.
            JobQueueError: the context belongs to no worker (made by hand).
        """
        text = to_json(state, root="checkpoint")
        limit = get_settings().checkpoint_max_bytes
        size = len(text.encode("utf-8"))
        if size > limit:
            raise InvalidPayload(
                "checkpoint",
                f"{size} bytes of JSON is over the limit of {limit} (CHECKPOINT_MAX_BYTES)",
            )
        recorder, token = self._recording()
        try:
            recorder.save_checkpoint(self.job_id, token, text)
        except LeaseLost:
            self.mark_lease_lost()
            raise LeaseLost(
                self.job_id,
                f"checkpoint of job {self.job_id} refused: this run lost its lease (another "
                "attempt holds the job, or it finished); nothing was written",
            ) from None
        self._checkpoint = json.loads(text)

    @property
    def checkpoint_state(self) -> Any:
        """Return the job's last checkpoint (decoded JSON), or None when it has none.

        On a later attempt, what an earlier attempt last wrote with :meth:`checkpoint`: resume
        from there. Read from the row once, at first use; then the value this run last wrote.
        """
        if self._checkpoint is _UNREAD:
            recorder, _ = self._recording()
            self._checkpoint = recorder.read_checkpoint(self.job_id)
        return self._checkpoint

    def _recording(self) -> tuple[RunRecorder, uuid.UUID]:
        if self.recorder is None or self.lease_token is None:
            raise JobQueueError(
                f"job {self.job_id}: this context records no progress or checkpoint (it was "
                "not made by a worker)"
            )
        return self.recorder, self.lease_token

    def mark_timed_out(self) -> None:
        """Internal: called by the worker when the run passes ``timeout_s``."""
        self._timed_out = True
        self._stop.set()

    def mark_lease_lost(self) -> None:
        """Internal: called by the worker's heartbeat when the lease is found lost."""
        self._lease_lost = True
        self._stop.set()

    def mark_cancel_requested(self) -> None:
        """Internal: called by the worker's heartbeat when a cancel request is seen."""
        self._cancel_requested = True
        self._stop.set()


class JobType:
    """A registered job type: a handler plus its per-type defaults.

    Calling the object calls the handler directly (synchronously, no queue). What ``@job``
    returns is a :class:`jobqueue.jobs.JobFunction`, which can also enqueue itself.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str,
        queue: str,
        priority: int,
        max_attempts: int | None,
        timeout_s: float | None,
        backoff: Backoff | None,
        takes_context: bool,
        dependency: str | None = None,
        rate_limit: Limiter | None = None,
        concurrency_key: str | Callable[..., str | None] | None = None,
        concurrency_limit: int | None = None,
    ) -> None:
        self.func = func
        self.name = name
        self.queue = queue
        self.priority = priority
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        self.backoff = backoff
        self.takes_context = takes_context
        self.dependency = dependency
        self.rate_limit = rate_limit
        self.concurrency_key, self.concurrency_limit = concurrency_key, concurrency_limit
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the handler directly, in this thread: no queue, no retries."""
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<JobType {self.name} queue={self.queue}>"


T = TypeVar("T", bound="JobType")

_registry: dict[str, JobType] = {}
_lock = threading.Lock()


def registered(type_name: str) -> JobType | None:
    """Return the job type registered as ``type_name`` in this process, or None (no import)."""
    return _registry.get(type_name)


@functools.cache
def signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    """Return ``func``'s signature, computed once (None when Python cannot tell it)."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def registry() -> dict[str, JobType]:
    """Return a copy of the registered job types, by name."""
    return dict(_registry)


# A TypeVar, not PEP 695 syntax: the shape tools (house.py) parse this with Python 3.11.
def declare(  # noqa: UP047
    f: Callable[..., Any],
    cls: type[T],
    *,
    name: str | None,
    queue: str,
    priority: int,
    max_attempts: int | None,
    timeout_s: float | None,
    backoff: dict[str, Any] | None,
    takes_context: bool,
    dependency: str | None,
    rate_limit: Any = None,
    concurrency_key: str | Callable[..., str | None] | None = None,
    concurrency_limit: int | None = None,
) -> T:
    """Internal: validate ``@job``'s options, build a ``cls`` for ``f`` and register it.

    :func:`jobqueue.job` documents the options; this is its body, kept below the client so the
    registry needs nothing that enqueues.

    Raises:
        ImproperlyConfigured: a bad default, a handler parameter that collides with an enqueue
            option name, or a second registration of the same name by another function.
    """
    type_name = name or f"{f.__module__}.{f.__qualname__}"
    where = f"@job for {type_name}"
    try:
        validate_options(
            queue=queue, priority=priority, max_attempts=max_attempts, timeout_s=timeout_s
        )
    except ValueError as exc:
        raise JobQueueConfigurationError(f"{where}: {exc}") from None
    if dependency is not None:
        try:
            validate_dependency_name(dependency)
        except ValueError as exc:
            raise JobQueueConfigurationError(f"{where}: {exc}") from None
    limit = None if rate_limit is None else parse_rate(rate_limit, f"{where} rate_limit")
    check_declared(where, concurrency_key, concurrency_limit)
    parsed_backoff = parse_backoff(backoff, where=f"{where} backoff") if backoff else None
    params = list(inspect.signature(f).parameters)
    if takes_context:
        params = params[1:]
    clash = sorted(set(params) & ENQUEUE_OPTIONS)
    if clash:
        raise JobQueueConfigurationError(
            f"{where}: handler parameters {', '.join(clash)} collide with enqueue options; "
            "rename them"
        )
    job_type = cls(
        f,
        name=type_name,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        timeout_s=timeout_s,
        backoff=parsed_backoff,
        takes_context=takes_context,
        dependency=dependency,
        rate_limit=limit,
        concurrency_key=concurrency_key,
        concurrency_limit=concurrency_limit,
    )
    with _lock:
        existing = _registry.get(type_name)
        if existing is not None and _qualified(existing.func) != _qualified(f):
            raise JobQueueConfigurationError(
                f"job type {type_name!r} is already registered by {_qualified(existing.func)}"
            )
        _registry[type_name] = job_type
    return job_type


def register(job_type: JobType) -> JobType:
    """Internal: add ``job_type`` to the registry unless its name is taken; return the holder.

    The ``django.tasks`` backend registers each task it validates this way, so workers resolve
    and back off tasks like ``@job`` types; a ``@job`` of the same name keeps the name.
    """
    with _lock:
        return _registry.setdefault(job_type.name, job_type)


def _qualified(f: Callable[..., Any]) -> str:
    return f"{f.__module__}.{f.__qualname__}"


def resolve(type_name: str) -> JobType:
    """Return the handler registered as ``type_name``, importing its module if needed.

    Raises:
        UnknownJobType: nothing registers that name (a skewed deploy, or a typo).
        ImportError: the handler's module exists but fails to import; that is a bug in it, and
            the job records this error instead of a misleading "unknown type".
    """
    found = _registry.get(type_name)
    if found is not None:
        return found
    module_name = type_name.rpartition(".")[0]
    while module_name:
        try:
            importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only a missing module on the path we are walking means "try the parent"
            # (e.g. "app.jobs.Class.method"); a module that imports something missing is broken.
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            module_name = module_name.rpartition(".")[0]
            continue
        break
    found = _registry.get(type_name)
    if found is None:
        raise UnknownJobType(type_name)
    return found

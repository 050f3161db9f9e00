"""Tasks written against Django's own API (``django.tasks``), run by jobqueue's workers.

Autodiscovered as ``tasks.py``. With ``JOBQUEUE_TEST_SIGNAL_LOG`` set, the receivers at the bottom
append one JSON line per signal to that file, so a test can see what a worker process sent.
"""

import asyncio
import json

from django.core.mail import send_mail
from django.dispatch import receiver

from jobqueue.errors import PermanentError
from tests.testapp.jobs import raise_holding_buffer
from tests.testapp.receivers import log

try:
    from django.tasks import task
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2 has no django.tasks: these stay plain functions, tests skip.
    task = None


if task is not None:

    @task
    def email_users(emails, subject, message):
        """Django's documented example."""
        return send_mail(subject=subject, message=message, from_email=None, recipient_list=emails)

    @task
    def add(a, b):
        return a + b

    @task(queue_name="tasks")
    def record(path, label):
        """Append ``label`` to ``path`` (to see the order tasks ran in)."""
        with open(path, "a") as f:
            f.write(f"{label}\n")
        return label

    @task(takes_context=True, max_attempts=3)
    def flaky(context, path, fail_until):
        """Fail attempts below ``fail_until``; record what the context says on each."""
        with open(path, "a") as f:
            f.write(
                json.dumps(
                    {
                        "attempt": context.attempt,
                        "id": context.task_result.id,
                        "status": context.task_result.status,
                        "errors": len(context.task_result.errors),
                        "worker_ids": context.task_result.worker_ids,
                    }
                )
                + "\n"
            )
        if context.attempt < fail_until:
            raise ConnectionError(f"attempt {context.attempt} failed")
        return {"attempt": context.attempt}

    @task
    async def async_add(a, b):
        await asyncio.sleep(0.01)
        return a + b

    @task(max_attempts=1)
    async def fail_holding_buffer(key, mb=5):
        """FIELD-CASES 32's handler F as an async django.tasks task."""
        await asyncio.sleep(0)
        raise_holding_buffer(key, mb, "boom", chained=False)

    @task(max_attempts=2)
    def always_fails(message):
        raise ValueError(message)

    @task
    def refuse(reason):
        raise PermanentError(reason)

    @task(dedupe_key=lambda order_id: f"order:{order_id}", tenant=lambda order_id: "acme")
    def charge(order_id):
        return order_id

    @task(concurrency_key=lambda account_id: f"acct:{account_id}", concurrency_limit=2)
    def per_account(account_id):
        return account_id

    @task(rate_limit={"rate": "5/s", "burst": 2})
    def rate_limited(n):
        return n

    def key_of_arguments(*args, **kwargs):
        """A dedupe key (or tenant) function that ``.using()`` can name (module level)."""
        return f"key:{args}:{sorted(kwargs.items())}"

    @task
    def echo(*args, **kwargs):
        """Return what it was given, as it was given (tuples stay tuples until normalised)."""
        return {"args": args, "kwargs": kwargs}

    #: What ``give_back`` returns, by name: JSON after Django's normalisation, or not.
    RETURNS = {
        "bytes and a tuple": lambda: (1, b"caf\xc3\xa9", {"k": (2,)}),
        "a set": lambda: {1, 2},
        "an object": lambda: object(),
        "nan": lambda: float("nan"),
    }

    @task
    def give_back(kind):
        """Return the value ``RETURNS`` names."""
        return RETURNS[kind]()

    @task(backend="immediate")
    def declared_elsewhere(x):
        """A task of another backend; tests move it onto jobqueue with .using()."""
        return x * 2

    def _describe(task_result):
        described = {
            "id": task_result.id,
            "path": task_result.task.module_path,
            "status": str(task_result.status),
            "attempts": task_result.attempts,
            "errors": [e.exception_class_path for e in task_result.errors],
            "finished": task_result.finished_at is not None,
        }
        if task_result.status == "SUCCESSFUL":
            described["return_value"] = task_result.return_value
        return described

    @receiver(task_enqueued)
    def _on_enqueued(sender, task_result, **kwargs):
        log("task_enqueued", sender=sender.__name__, **_describe(task_result))

    @receiver(task_started)
    def _on_started(sender, task_result, **kwargs):
        log("task_started", sender=sender.__name__, **_describe(task_result))

    @receiver(task_finished)
    def _on_finished(sender, task_result, **kwargs):
        import sys

        log(
            "task_finished",
            sender=sender.__name__,
            in_handler=sys.exc_info()[0] is not None,
            **_describe(task_result),
        )

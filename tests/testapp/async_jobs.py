"""``async def`` handlers the tests enqueue (importable by worker subprocesses by type name)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from asgiref.sync import sync_to_async

import jobqueue
from jobqueue import job
from jobqueue.errors import PermanentError, RetryAfter
from jobqueue.worker.context import JobContext
from tests.httpserver import get, get_blocking


@job(queue="async")
async def fetch(url: str) -> int:
    """Await a GET of ``url``; return its status."""
    return await get(url)


@job(queue="sync-fetch")  # not "async": a queue of async types only fills the loop at once
def fetch_sync(url: str) -> int:
    """The same GET on a handler thread (the bench's sync twin)."""
    return get_blocking(url)


@job(queue="async", takes_context=True)
async def sleep_forever(context: JobContext, marker: str = "") -> None:
    """Await for an hour; write ``marker`` (a file path) when the task is cancelled."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        if marker:
            Path(marker).write_text(f"cancelled {context.job_id}")
        raise


@job(queue="async", takes_context=True)
async def cancel_myself(context: JobContext, alias: str = "default") -> None:
    """Play the operator: ask to cancel this job, then await until the worker stops the task."""
    await sync_to_async(jobqueue.cancel)(context.job_id, using=alias)
    await asyncio.sleep(3600)


@job(queue="async")
async def retry_after(seconds: float) -> None:
    """Ask to be retried in exactly ``seconds``."""
    await asyncio.sleep(0)
    raise RetryAfter(seconds)


@job(queue="async")
async def give_up() -> None:
    """Fail for good."""
    await asyncio.sleep(0)
    raise PermanentError("no use retrying")


@job(queue="async", takes_context=True)
async def steps(context: JobContext, total: int) -> int:
    """Record progress and a checkpoint at each step, from the event loop."""
    start = (await context.acheckpoint_state() or {}).get("done", 0)
    for done in range(start + 1, total + 1):
        await context.aprogress(done, total)
        await context.acheckpoint({"done": done})
    return total


@job(queue="async")
async def block_the_loop(seconds: float) -> str:
    """A sync sleep inside ``async def``: the bug the stall detector names."""
    time.sleep(seconds)
    await asyncio.sleep(0)
    return "done"

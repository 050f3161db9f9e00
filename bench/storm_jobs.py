"""Handlers for bench/retry_storm.py's real run: one HTTP call to the stand-in dependency.

Importable by the worker processes as ``bench.storm_jobs`` (the bench puts the repository root
on PYTHONPATH). ``call`` has no dependency; ``call_guarded`` names one, so its breaker applies.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from jobqueue import job


def _call(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:  # 503: down or over capacity
        raise ConnectionError(f"dependency answered {exc.code}") from None


@job(name="bench.storm_jobs.call", max_attempts=50)
def call(url: str) -> str:
    return _call(url)


@job(name="bench.storm_jobs.call_guarded", max_attempts=50, dependency="storm-dependency")
def call_guarded(url: str) -> str:
    return _call(url)

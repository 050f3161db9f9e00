"""What every benchmark script shares: its own database, recreated, and the environment that
points Django (and the worker processes it starts) at it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: The jobqueue checkout measured: this one, or another (``BENCH_JOBQUEUE_ROOT``, set by
#: ``run_all.py --baseline`` for the "before" side). Its ``jobqueue`` and ``tests`` packages are
#: the ones imported here and in every worker process the scripts start.
ROOT = Path(os.environ.get("BENCH_JOBQUEUE_ROOT") or Path(__file__).parent.parent).resolve()


def bench_env(url: str) -> dict[str, str]:
    """Point this process and its children at ``url`` with the test settings; return the env."""
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(ROOT),
        "JOBQUEUE_LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return env


def recreate_database(url: str, env: dict[str, str], cwd: Path = ROOT) -> None:
    """Drop and create the database named by ``url``, then migrate it (``migrate`` runs in
    ``cwd`` with ``env``, so it reads the settings that env names)."""
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "-v", "0"], env=env, check=True, cwd=cwd
    )

"""Run ``manage.py jobqueue`` for a test: a real process where the test database can be shared.

On SQLite the test database lives in memory, which no other process can open; there the command
runs in this process (``call_command``) and the result has the same shape.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections

from tests.conftest import ROOT, subprocess_env


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def shared_database() -> bool:
    connection = connections["default"]
    return connection.vendor != "sqlite" or not connection.is_in_memory_db()


def cli(*args: str, in_process: bool | None = None, env: dict[str, str] | None = None) -> Result:
    """Run ``manage.py jobqueue *args``: a real process where the database can be shared."""
    if in_process is None:
        in_process = not shared_database()
    if not in_process:
        proc = subprocess.run(
            [sys.executable, "-m", "django", "jobqueue", *args],
            cwd=ROOT,
            env=env or subprocess_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("jobqueue", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        code = int(exc.code or 0)
    except CommandError as exc:
        code = exc.returncode
        err.write(str(exc))
    return Result(code, out.getvalue(), err.getvalue())

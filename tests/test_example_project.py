"""The README's main job: the example shop's rundemo, on SQLite and on PostgreSQL."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.conf import settings

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def run_demo(tmp_path, database_url: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": database_url,
        "EMAIL_FILE_PATH": str(tmp_path / "mail"),
        "SHOP_LOG_DIR": str(tmp_path / "logs"),
        "SHOP_PARTNER_SEED": "11",
        "PYTHONUNBUFFERED": "1",
    }
    # Exactly what `bash .ci/demo` runs once the virtualenv is set up.
    return subprocess.run(
        [sys.executable, "manage.py", "rundemo", "--orders", "200"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def check_summary(result: subprocess.CompletedProcess, tmp_path) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Orders placed        200" in out
    jobs = re.search(r"Jobs\s+400: succeeded (\d+), dead (\d+), cancelled 0, unfinished 0", out)
    assert jobs, out
    succeeded, dead = int(jobs[1]), int(jobs[2])
    assert succeeded + dead == 400
    # Every receipt goes out (the receipt job never fails for good); only charges may die.
    assert succeeded >= 200
    assert "Demo complete: every job finished, every order has its receipt." in out
    assert len(list((tmp_path / "mail").glob("*.eml"))) == 200


def test_demo_on_sqlite(tmp_path):
    result = run_demo(tmp_path, f"sqlite:///{tmp_path / 'shop.sqlite3'}")
    check_summary(result, tmp_path)


@pytest.mark.skipif(
    "postgresql" not in settings.DATABASES["default"]["ENGINE"], reason="needs PostgreSQL"
)
def test_demo_on_postgresql(tmp_path):
    db = settings.DATABASES["default"]
    name = f"jobqueue_demo_{uuid.uuid4().hex[:8]}"
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    admin_url = f"postgresql://{db.get('USER') or 'postgres'}@{host}:{port}/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgres://") + f"/{name}"
        result = run_demo(tmp_path, url)
        check_summary(result, tmp_path)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

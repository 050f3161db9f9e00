"""Field case 27: workers and a producer behind a real PgBouncer in transaction mode.

A private cluster (tests/pgcluster.py) with a private PgBouncer in front of it
(tests/pgbouncer.py: ``pool_mode = transaction``, ``default_pool_size = 6``,
``max_db_connections = 12``). Pooler mode on (``JOBQUEUE["POOLED_DATABASES"]``): everything goes
through the pooler but each worker's one listening connection, on the ``direct`` alias. Sized
for CI: 300 jobs, 2 worker processes of 4 slots, one SIGTERMed midway and replaced, a ``*/10 s``
cron entry watched for about 30 s. The negative: pooler mode off behind the same pooler,
``runworkers`` refuses to start naming the setting, and ``check --database`` reports it. And a
pooled alias without ``LISTEN_DATABASE``: the worker polls, and nothing LISTENs anywhere.

Also the connection budget (docs/deployment.md): server connections of one real ``runworkers``
process, idle and busy, counted in ``pg_stat_activity`` by application name.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests.conftest import (
    ROOT,
    migrated_database,
    requires_postgres,
    start_runworkers,
    subprocess_env,
    wait_for,
)
from tests.factories import insert_ready_jobs
from tests.pgbouncer import PrivateBouncer, pgbouncer_binary

pytestmark = [
    requires_postgres(),
    pytest.mark.slow,
    pytest.mark.skipif(pgbouncer_binary() is None, reason="pgbouncer is not installed"),
]

JOBS = 300
NOOP = "tests.testapp.jobs.noop"
WORK = "tests.testapp.jobs.recorded_work"
#: What prepared statements shared across clients produce (procrastinate#1074).
POOLER_ERRORS = ("DuplicatePreparedStatement", "InvalidSqlStatementName", "ProtocolViolation")
POOLED = {"POOLED_DATABASES": {"default": {"LISTEN_DATABASE": "direct"}}}

#: Jobs the producer enqueues before the replacement worker starts; the rest after, so the
#: replacement has work however fast the others drained the first ones.
FIRST_JOBS = 270
# The producer: a web process enqueueing through the pooler, half now, half 0-15 s ahead;
# jobs [argv[1], argv[2]).
PRODUCER = f"""
import sys
import django; django.setup()
from datetime import timedelta
from django.utils import timezone
import jobqueue
now = timezone.now()
jobs = [
    {{"queue": "q", "job_type": "{WORK}", "payload": {{"sleep_s": 0.01}},
      **({{"run_at": now + timedelta(seconds=(i % 150) / 10)}} if i % 2 else {{}})}}
    for i in range(int(sys.argv[1]), int(sys.argv[2]))
]
for start in range(0, len(jobs), 30):
    jobqueue.enqueue_many(jobs[start:start + 30])
print("enqueued", len(jobs))
"""


class Sampler:
    """Every 0.5 s: PgBouncer's ``SHOW POOLS``, and the server's aborted or idle lock holders."""

    def __init__(self, bouncer: PrivateBouncer, direct_url: str, dbname: str) -> None:
        self.bouncer, self.direct_url, self.dbname = bouncer, direct_url, dbname
        self.longest_waiting_s = 0.0
        self.idle_advisory_holders: list[tuple] = []
        self.aborted: dict[tuple, int] = {}
        self.max_server_connections = 0
        #: Samples taken, and what ended the sampling early: the asserts on the figures above
        #: mean nothing unless it sampled, and kept sampling.
        self.samples = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        try:
            self._sample()
        except BaseException as exc:  # noqa: BLE001 - handed to the test in the main thread
            self.error = exc

    def _sample(self) -> None:
        waiting_since: float | None = None
        with psycopg.connect(self.direct_url, autocommit=True) as conn:
            while not self._stop.wait(0.5):
                self.samples += 1
                pools = self.bouncer.show_pools(self.dbname)
                now = time.monotonic()
                if any(row["cl_waiting"] for row in pools):
                    waiting_since = waiting_since or now
                    self.longest_waiting_s = max(self.longest_waiting_s, now - waiting_since)
                else:
                    waiting_since = None
                self.idle_advisory_holders += conn.execute(
                    "SELECT a.pid, a.query FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                    "WHERE l.locktype = 'advisory' AND a.state = 'idle'"
                ).fetchall()
                # (pid, state_change) of each aborted transaction: seen in two samples 0.5 s
                # apart means it stayed aborted that long.
                for key in conn.execute(
                    "SELECT pid, state_change FROM pg_stat_activity "
                    "WHERE state = 'idle in transaction (aborted)'"
                ).fetchall():
                    self.aborted[key] = self.aborted.get(key, 0) + 1
                self.max_server_connections = max(
                    self.max_server_connections,
                    conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
                        [self.dbname],
                    ).fetchone()[0],
                )


@pytest.fixture
def bounced(private_cluster):
    """A migrated database on a private cluster, and a transaction-mode PgBouncer before it."""
    bouncer = PrivateBouncer(private_cluster.port, default_pool_size=6, max_db_connections=12)
    bouncer.start()
    try:
        yield private_cluster, bouncer
    finally:
        bouncer.stop()


def django_command(env: dict, *args: str) -> subprocess.CompletedProcess:
    """Run ``python -m django ARGS`` with ``env`` and return it finished (output captured)."""
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _pooled_env(
    direct_url: str, bouncer: PrivateBouncer, db: str, **settings: object
) -> dict[str, str]:
    """Environment of a process in pooler mode: ``default`` through PgBouncer, ``direct`` not."""
    env = subprocess_env(**POOLED, **settings)
    env["DATABASE_URL"] = bouncer.url(db)
    env["JOBQUEUE_DIRECT_URL"] = direct_url
    return env


def test_fc27_workers_producer_and_cron_through_a_transaction_pooler(bounced, tmp_path):
    cluster, bouncer = bounced
    # missed="all": while one worker hands over to the next, a fire time with no leader still
    # fires (late), so the fire times below have no gap however long the hand-over takes.
    cron = {"m": {"cron_expr": "*/10 * * * * *", "job_type": NOOP, "queue": "q", "missed": "all"}}
    direct_url, _ = migrated_database(cluster, "jq_fc27")
    env = _pooled_env(
        direct_url,
        bouncer,
        "jq_fc27",
        CRON=cron,
        LEASE_SECONDS=3,
        POLL_INTERVAL_SECONDS=1,
        REAPER_INTERVAL_SECONDS=0.5,
        LEADER_LEASE_SECONDS=3,
    )

    def sql(query: str, params: object = None) -> list[tuple]:
        with psycopg.connect(direct_url, autocommit=True) as conn:
            return conn.execute(query, params).fetchall()

    def listeners() -> int:
        return sql(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%' "
            "AND application_name LIKE 'jobqueue-listener %%'"
        )[0][0]

    def produce(start: int, end: int) -> None:
        producer = subprocess.run(
            [sys.executable, "-c", PRODUCER, str(start), str(end)],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert producer.returncode == 0, producer.stderr
        produced.append(producer.stdout + producer.stderr)

    produced: list[str] = []

    def succeeded() -> int:
        return sql(
            "SELECT count(*) FROM jobqueue_job WHERE type = %s AND state = 'succeeded'",
            [WORK],
        )[0][0]

    logs = [tmp_path / name for name in ("a.log", "b.log", "c.log")]
    args = ("--queues", "q", "--concurrency", "4", "--grace", "20")
    with Sampler(bouncer, direct_url, "jq_fc27") as sampler:
        first, second = start_runworkers(env, logs[:2], *args)
        procs = [first, second]
        try:
            # Each worker LISTENs on the direct alias (one listening connection each).
            wait_for(lambda: listeners() == 2, timeout=300)
            produce(0, FIRST_JOBS)
            wait_for(lambda: succeeded() >= FIRST_JOBS // 2, timeout=300)
            # Both workers stop (SIGTERM, a graceful drain) and a replacement takes over: the
            # jobs enqueued after it is listening are its alone, however fast the first two
            # drained theirs (on a loaded machine they may finish all of them first).
            for proc in (first, second):
                proc.send_signal(15)
            assert first.wait(timeout=300) == 0
            assert second.wait(timeout=300) == 0
            procs.append(start_runworkers(env, logs[2:], *args)[0])
            replacement_pid = procs[-1].pid
            wait_for(lambda: listeners() == 1, timeout=300)
            produce(FIRST_JOBS, JOBS)
            # The replacement claims: a Run row written by its pid.
            wait_for(
                lambda: sql("SELECT count(*) FROM testapp_run WHERE pid = %s", [replacement_pid])[
                    0
                ][0],
                timeout=300,
            )
            wait_for(lambda: succeeded() == JOBS, timeout=240)
            # The cron entry fires for about 30 s (3 fire times) after the first one.
            wait_for(
                lambda: sql("SELECT count(*) FROM jobqueue_job WHERE type = %s", [NOOP])[0][0] >= 4,
                timeout=120,
            )
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(15)
            for proc in procs:
                proc.wait(timeout=60)

    assert sql("SELECT state, count(*) FROM jobqueue_job WHERE type = %s GROUP BY 1", [WORK]) == [
        ("succeeded", JOBS)
    ]
    # Exactly one invocation per job.
    runs = sql("SELECT job_id, count(*) FROM testapp_run GROUP BY 1")
    assert len(runs) == JOBS
    assert {count for _, count in runs} == {1}
    # The cron entry: one job per fire time (its fire record names it), none missing between
    # the first and the last.
    fires = sql(
        "SELECT f.fire_time, count(j.id) FROM jobqueue_cronfire f "
        "LEFT JOIN jobqueue_job j ON j.id = f.job_id GROUP BY 1 ORDER BY 1"
    )
    assert [count for _, count in fires] == [1] * len(fires)
    assert sql("SELECT count(*) FROM jobqueue_job WHERE type = %s", [NOOP]) == [(len(fires),)]
    fire_times = [fire_time for fire_time, _ in fires]
    steps = {(b - a).total_seconds() for a, b in itertools.pairwise(fire_times)}
    assert steps == {10.0}, fire_times
    # The pool never starved, no transaction stayed aborted, no advisory lock outlived its
    # transaction, and the server never had more connections than the pool plus 3 listeners
    # (and this test's own sampler).
    assert sampler.error is None, sampler.error
    assert sampler.samples > 0
    assert sampler.longest_waiting_s <= 5.0
    assert [key for key, seen in sampler.aborted.items() if seen > 1] == []
    assert sampler.idle_advisory_holders == []
    assert sampler.max_server_connections <= 12 + 3
    texts = {log.name: log.read_text() for log in logs}
    texts["producer"] = "".join(produced)
    texts["pgbouncer"] = bouncer.log.read_text()
    for name, text in texts.items():
        for error in POOLER_ERRORS:
            assert error not in text, (name, error)
        assert "prepared statement" not in text, name
    for log in logs:
        assert "Traceback" not in log.read_text(), log.name


def test_fc27_negative_unmarked_pooler_refuses_to_start_naming_the_setting(bounced, tmp_path):
    cluster, bouncer = bounced
    _, direct_env = migrated_database(cluster, "jq_fc27n", LISTEN_NOTIFY=True)
    env = dict(direct_env, DATABASE_URL=bouncer.url("jq_fc27n"))
    worker = django_command(env, "runworkers", "--queues", "q")
    assert worker.returncode != 0
    assert "POOLED_DATABASES" in worker.stderr
    assert "transaction pooler" in worker.stderr
    check = django_command(env, "check", "--database", "default")
    assert check.returncode != 0
    assert "jobqueue.E021" in check.stderr
    assert "POOLED_DATABASES" in check.stderr


def test_pooled_without_a_listen_alias_polls_and_never_listens(bounced, tmp_path):
    cluster, bouncer = bounced
    direct_url, _ = migrated_database(cluster, "jq_poll")
    env = subprocess_env(POOLED_DATABASES={"default": {}}, POLL_INTERVAL_SECONDS=1)
    env["DATABASE_URL"] = bouncer.url("jq_poll")
    log = tmp_path / "w.log"
    (proc,) = start_runworkers(env, [log], "--queues", "q", "--concurrency", "2")

    def one(query: str, params: object = None) -> object:
        with psycopg.connect(direct_url, autocommit=True) as conn:
            return conn.execute(query, params).fetchone()[0]

    try:
        with psycopg.connect(direct_url, autocommit=True) as conn:
            insert_ready_jobs(conn, "q", WORK, 10)
        wait_for(
            lambda: one("SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'") == 10,
            timeout=120,
        )
        assert one("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'") == 0
    finally:
        proc.send_signal(15)
        assert proc.wait(timeout=60) == 0
    assert one("SELECT count(*) FROM testapp_run") == 10
    assert "Traceback" not in log.read_text()


def _connections(url: str, name: str, worker_id: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "OR application_name = %s",
            [name, f"jobqueue-listener {worker_id}"],
        ).fetchone()[0]


def test_connection_budget_of_one_worker_process(private_cluster, tmp_path):
    """Idle: the claim loop, the maintenance thread (heartbeat, reaper, cron) and the listener;
    the pruner connects once a minute and lets go. Busy: plus one per handler using the ORM."""
    url, env = migrated_database(
        private_cluster, "jq_budget", POLL_INTERVAL_SECONDS=0.2, LEASE_SECONDS=3
    )
    env["JOBQUEUE_TEST_APPLICATION_NAME"] = "budget-worker"
    (proc,) = start_runworkers(
        env, [tmp_path / "w.log"], "--concurrency", "4", "--worker-id", "budget"
    )

    def one(query: str) -> object:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(query).fetchone()[0]

    try:
        # At rest, every thread has had its first round: the scheduler leads (its lease is
        # written), the heartbeat has renewed the worker row (every lease/3 = 1 s), and the
        # pruner (its first round at once) is done.
        wait_for(
            lambda: one("SELECT count(*) FROM jobqueue_leaderlease WHERE holder = 'budget'"),
            timeout=120,
        )
        wait_for(
            lambda: one(
                "SELECT count(*) FROM jobqueue_worker WHERE worker_id = 'budget' "
                "AND last_seen_at > started_at + interval '2 seconds'"
            ),
            timeout=120,
        )
        samples = []
        for _ in range(10):
            samples.append(_connections(url, "budget-worker", "budget"))
            time.sleep(0.3)
        assert max(samples) <= 3, samples
        with psycopg.connect(url, autocommit=True) as conn:
            insert_ready_jobs(conn, "default", WORK, 4, json.dumps({"sleep_s": 3}))
        wait_for(lambda: _connections(url, "budget-worker", "budget") >= 4, timeout=60)
        busy = max(_connections(url, "budget-worker", "budget") for _ in range(10))
        assert busy <= 3 + 4
    finally:
        proc.send_signal(15)
        proc.wait(timeout=60)
    log = Path(tmp_path / "w.log").read_text()
    assert "Traceback" not in log, log

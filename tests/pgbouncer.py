"""A private PgBouncer in transaction mode, in front of a private cluster (tests/pgcluster.py).

Debian's ``pgbouncer`` (``.ci/run`` installs it when missing), started on a free port in a
temporary folder, as the ``postgres`` OS user when the tests run as root (PgBouncer refuses
root), with trust authentication for one role (the role the tests connect as: ``DATABASE_URL``'s,
``postgres`` by default), and stopped afterwards. Its admin console (database ``pgbouncer``)
answers ``SHOW POOLS``.

Two test runs on one machine (two checkouts side by side) each start their own: a port is
asked of the kernel (``bind(0)``), and a bouncer that could not listen on it, or a port that
turned out to be another run's bouncer (its ``SHOW CONFIG`` names another pidfile), is retried
on a fresh port.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from tests.pgcluster import _free_port

#: Debian's binary; PATH lookup is a fallback for other systems.
PGBOUNCER = "/usr/sbin/pgbouncer"


def pgbouncer_binary() -> str | None:
    """Return the pgbouncer executable, or None when it is not installed."""
    if os.access(PGBOUNCER, os.X_OK):
        return PGBOUNCER
    return shutil.which("pgbouncer")


class PrivateBouncer:
    """PgBouncer on a free port in front of ``127.0.0.1:server_port``: ``start``, ``url``, ``stop``.

    Args:
        server_port: the PostgreSQL server's port (every database).
        user: the role clients and PgBouncer log in as (trust authentication).
        pool_mode: ``transaction`` (the mode under test) or ``session``.
        default_pool_size: server connections per (database, user) pair.
        max_db_connections: server connections per database, all pools together.
    """

    def __init__(
        self,
        server_port: int,
        *,
        user: str = "postgres",
        pool_mode: str = "transaction",
        default_pool_size: int = 6,
        max_db_connections: int = 12,
    ) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.binary = binary
        self.server_port = server_port
        self.user = user
        self.settings = {
            "pool_mode": pool_mode,
            "default_pool_size": default_pool_size,
            "max_db_connections": max_db_connections,
        }
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="jobqueue-pgbouncer-"))
        self.log = self.root / "pgbouncer.log"
        self.pidfile = self.root / "pgbouncer.pid"
        self.as_postgres = os.geteuid() == 0
        if '"' in user:
            raise ValueError(f"a role name with a double quote is not supported here: {user!r}")
        (self.root / "userlist.txt").write_text(f'"{user}" ""\n')
        self._write_ini()
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
            for path in self.root.iterdir():
                shutil.chown(path, "postgres", "postgres")

    def _write_ini(self) -> None:
        ini = self.root / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={self.server_port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            f"unix_socket_dir = {self.root}\n"
            "auth_type = trust\n"
            f"auth_file = {self.root / 'userlist.txt'}\n"
            f"pool_mode = {self.settings['pool_mode']}\n"
            f"default_pool_size = {self.settings['default_pool_size']}\n"
            f"max_db_connections = {self.settings['max_db_connections']}\n"
            "max_client_conn = 500\n"
            f"admin_users = {self.user}\n"
            f"stats_users = {self.user}\n"
            f"logfile = {self.log}\n"
            f"pidfile = {self.pidfile}\n"
            # Django's psycopg sends none of these, but psql and libpq tools may.
            "ignore_startup_parameters = extra_float_digits,options\n"
        )
        if self.as_postgres:
            shutil.chown(ini, "postgres", "postgres")

    def start(self, attempts: int = 5) -> None:
        """Start PgBouncer as a daemon and wait until it accepts connections.

        A port taken between asking for it and PgBouncer listening on it (another run's
        bouncer or server) is given up for a fresh one, ``attempts`` times in all.
        """
        for attempt in range(attempts):
            if self._start_once():
                return
            self.stop_process()
            log = self._read_log()
            self.log.unlink(missing_ok=True)
            self.pidfile.unlink(missing_ok=True)
            if attempt + 1 == attempts:
                raise RuntimeError(
                    f"PgBouncer could not listen on a free port in {attempts} attempts; "
                    f"its last log: {log[-2000:]!r}"
                )
            self.port = _free_port()
            self._write_ini()

    def _read_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _start_once(self) -> bool:
        """Start on ``self.port``; False when that port turned out not to be ours."""
        cmd = [self.binary, "-d", str(self.root / "pgbouncer.ini")]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=self.root)
        deadline = time.monotonic() + 30
        while True:
            if "Address already in use" in self._read_log():
                return False
            try:
                with psycopg.connect(self.url("pgbouncer"), autocommit=True) as conn:
                    cur = psycopg.ClientCursor(conn)
                    cur.execute("SHOW CONFIG")
                    config = {row[0]: row[1] for row in cur.fetchall()}
                # Another run's bouncer on this port (it let our role in: same role, trust).
                return config.get("pidfile") == str(self.pidfile)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def url(self, dbname: str) -> str:
        """Return a DATABASE_URL for ``dbname`` through PgBouncer (``pgbouncer``: its console)."""
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def show_pools(self, dbname: str) -> list[dict[str, object]]:
        """Return the ``SHOW POOLS`` rows of ``dbname`` (cl_active, cl_waiting, sv_active...)."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True) as conn:
            # The console speaks the simple query protocol: a client-side-binding cursor.
            cur = psycopg.ClientCursor(conn, row_factory=dict_row)
            cur.execute("SHOW POOLS")
            return [row for row in cur.fetchall() if row["database"] == dbname]

    def stop_process(self) -> None:
        """Stop PgBouncer (its folder stays)."""
        try:
            pid = int(self.pidfile.read_text().strip())
            os.kill(pid, signal.SIGTERM)
        except (FileNotFoundError, ValueError, ProcessLookupError):
            pass

    def stop(self) -> None:
        """Stop PgBouncer and remove its folder (its log is read before this)."""
        self.stop_process()
        shutil.rmtree(self.root, ignore_errors=True)

"""A private PostgreSQL cluster for tests that stop or restart the server.

Such tests must never touch the shared server: this starts a throwaway cluster (initdb, pg_ctl)
on a free port in a temporary folder, as the ``postgres`` OS user when the tests run as root
(initdb refuses root), and removes it afterwards.

Two test runs on one machine each make their own: the port is asked of the kernel
(``bind(0)``), and a first start that finds it taken by then (another run's server or bouncer)
is retried on a fresh port; the socket directory and data are in the cluster's own folder.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateCluster:
    """A PostgreSQL server of the test's own: ``start``, ``stop``, ``restart``, ``url``."""

    def __init__(self, *, initdb: bool = True) -> None:
        bindir = _bin_dir()
        if bindir is None:
            raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        self.bindir = bindir
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="jobqueue-pg-"))
        self.datadir = self.root / "data"
        self.as_postgres = os.geteuid() == 0
        self._started = False
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        if initdb:
            self._run(
                "initdb", "-D", str(self.datadir), "-U", "postgres", "--auth=trust", "-E", "UTF8"
            )

    @classmethod
    def standby_of(cls, primary: PrivateCluster) -> PrivateCluster:
        """Return a streaming standby of the running ``primary``, not started, on its own port.

        A base backup (``pg_basebackup -R``: it writes ``standby.signal`` and the
        ``primary_conninfo``), as a failover's replica is made; :meth:`promote` makes it the
        primary.
        """
        standby = cls(initdb=False)
        standby._run(
            "pg_basebackup",
            "-D",
            str(standby.datadir),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        )
        return standby

    def promote(self) -> None:
        """Promote this standby to a primary and wait until it accepts writes."""
        self._run("pg_ctl", "-D", str(self.datadir), "-w", "promote")

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / tool), *args]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, cwd=self.root)

    def start(self, attempts: int = 5) -> None:
        """Start the server and wait until it accepts connections.

        Before the first successful start, a port found taken is given up for a fresh one
        (``attempts`` in all); a restart keeps the port its clients know.
        """
        for attempt in range(attempts):
            try:
                self._start()
            except subprocess.CalledProcessError:
                log = self.root / "server.log"
                text = log.read_text(errors="replace") if log.exists() else ""
                if self._started or "could not bind" not in text or attempt + 1 == attempts:
                    raise
                log.unlink()
                self.port = _free_port()
            else:
                self._started = True
                return

    def _start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.datadir),
            "-o",
            options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast`` disconnects every client, as a restart does)."""
        self._run("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        """Restart with a fast shutdown: every connection is cut."""
        self.stop("fast")
        self.start()

    def url(self, dbname: str = "postgres") -> str:
        """Return a DATABASE_URL for ``dbname`` on this server."""
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create a database and return its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        """Stop the server and remove its files."""
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

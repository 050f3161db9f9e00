"""Where a drain's time goes per job: the server's statements and a worker process's Python.

    .venv/bin/python bench/drain_profile.py [--jobs 20000] [--processes 2] [--runs 1] [--py-spy]

On a private cluster (``fsync=off``, pg_stat_statements; ``bench/_shapes_drivers.py``), as
``bench/shapes.py``'s drain row runs it: ``runworkers --processes N`` on its defaults, started
and warmed first, then ``--jobs`` no-op jobs enqueued in one transaction. The statistics are
reset just before the enqueue; after the last job is done the script prints the drain's jobs/s
(first start to last finish, database clock) and, per statement, its calls per 100 jobs and its
server time (execution + planning) per job in ms. ``BENCH_JOBQUEUE_ROOT`` measures another
checkout. ``--py-spy`` also samples the worker processes (``py-spy record --subprocesses``,
native off, 250 Hz) during the drain and prints the functions with the most inclusive and own
samples, as a share of the samples that held the GIL (``--gil``).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench._shapes_drivers import (  # noqa: E402
    NOOP,
    jq_client,
    jq_env,
    jq_ready,
    jq_span,
    jq_wait_done,
    jq_warm,
    jq_workers,
    rows,
    server_cpu_s,
    start_private,
    stop,
    stop_private,
)

PY_SPY = str(Path(sys.executable).with_name("py-spy"))


def statements(url: str, db: str, jobs: int) -> list[tuple]:
    """Return (calls per 100 jobs, ms per job, rows per call, min / mean / max ms of execution
    per call, mean ms of planning per call, statement start) for ``db``, most time first."""
    found = rows(
        url,
        "SELECT s.calls, s.total_exec_time + s.total_plan_time,"
        " s.rows::float8 / nullif(s.calls, 0),"
        " s.min_exec_time, s.mean_exec_time, s.max_exec_time,"
        " s.total_plan_time / nullif(s.calls, 0),"
        " left(regexp_replace(s.query, '\\s+', ' ', 'g'), 80)"
        " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
        " WHERE d.datname = %s AND s.calls > 0 AND s.query NOT ILIKE '%%pg_stat%%'"
        " ORDER BY 2 DESC LIMIT 15",
        [db],
    )
    return [(100 * c / jobs, ms / jobs, *rest) for c, ms, *rest in found]


def group_cpu_s(pgid: int) -> float:
    """Return the CPU seconds (user + system) the live processes of group ``pgid`` used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def spy_summary(raw: Path, top: int) -> None:
    """Print the ``top`` functions by inclusive and own samples of py-spy's raw output."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = [f.split(" (")[0] + " " + f.rsplit("/", 1)[-1] for f in stack.split(";")[1:]]
        total += n
        for frame in set(frames):
            inclusive[frame] += n
        if frames:
            own[frames[-1]] += n
    print(f"py-spy: {total} samples holding the GIL")
    for title, counter in (("inclusive", inclusive), ("own", own)):
        print(f"  top {top} {title}:")
        for frame, n in counter.most_common(top):
            print(f"    {100 * n / total:5.1f}%  {frame}")


def run(target, db: str, jobs: int, processes: int, spy: bool, top: int) -> None:
    target.fresh_jq()
    env = jq_env(target)
    proc = jq_workers(env, processes)
    spy_proc = None
    raw = Path(tempfile.mkdtemp(prefix="drain-profile-")) / "raw.txt"
    try:
        jq_ready(target, processes)
        jq_warm(target, env, processes)
        rows(target.jq_url, "SELECT pg_stat_statements_reset()")
        datadir = Path(rows(target.jq_url, "SHOW data_directory")[0][0])
        cpu0 = (server_cpu_s(datadir), group_cpu_s(proc.pid))
        if spy:
            spy_proc = subprocess.Popen(
                [PY_SPY, "record", "--gil", "--subprocesses", "-r", "250", "-f", "raw",
                 "-o", str(raw), "--pid", str(proc.pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)
        ids = jq_client(env, "bulk", {"groups": [{"type": NOOP, "n": jobs}]})
        jq_wait_done(target, ids["first"], ids["last"], 600)
        cpu1 = (server_cpu_s(datadir), group_cpu_s(proc.pid))
    finally:
        if spy_proc is not None:
            spy_proc.send_signal(2)
            spy_proc.wait(timeout=60)
        stop([proc])
    done, span = jq_span(target, ids["first"], ids["last"])
    print(f"drain: {done / span:,.0f} jobs/s ({done} jobs, {span:.2f} s), load {os.getloadavg()}")
    server, workers = ((b - a) * 1000 / jobs for a, b in zip(cpu0, cpu1, strict=True))
    print(
        f"  CPU per job, from the enqueue to the last done: server {server:.3f} ms,"
        f" worker processes {workers:.3f} ms"
    )
    total = 0.0
    print("  calls/100 jobs, ms/job, rows/call, min/mean/max ms of execution, planning ms a call")
    for calls, ms, per, low, mean, high, plan, query in statements(target.jq_url, db, jobs):
        total += ms
        print(
            f"  {calls:7.1f} {ms:8.4f} {per:6.1f}  {low:5.2f}/{mean:5.2f}/{high:6.2f}"
            f"  {plan or 0:5.2f}  {query}"
        )
    print(f"  sum of the top statements: {total:.4f} ms/job")
    if spy and raw.exists():
        spy_summary(raw, top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--py-spy", action="store_true")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--explain",
        type=float,
        default=0.0,
        help="auto_explain (analyze) this fraction of statements, nested too,"
        " into the cluster's log (printed at the end)",
    )
    cfg = parser.parse_args()
    private = start_private(with_bouncer=False)
    cluster = private.cluster
    try:
        if cfg.explain:
            with (cluster.datadir / "postgresql.conf").open("a") as conf:
                conf.write(
                    "session_preload_libraries = 'auto_explain'\n"
                    "auto_explain.log_min_duration = 0\n"
                    "auto_explain.log_analyze = on\n"
                    "auto_explain.log_buffers = on\n"
                    "auto_explain.log_nested_statements = on\n"
                    f"auto_explain.sample_rate = {cfg.explain}\n"
                    "pg_stat_statements.track = all\n"
                )
            rows(private.target.jq_url + "_tpl", "SELECT pg_reload_conf()")
        for _ in range(cfg.runs):
            run(private.target, "shapes", cfg.jobs, cfg.processes, cfg.py_spy, cfg.top)
        if cfg.explain:
            print((cluster.root / "server.log").read_text())
    finally:
        stop_private(private)


if __name__ == "__main__":
    main()

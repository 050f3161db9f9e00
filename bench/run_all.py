"""Every benchmark figure of the performance issue, in one run, printed as one table.

    .venv/bin/python bench/run_all.py                 # all figures, median of 3 runs (~15 min)
    .venv/bin/python bench/run_all.py --runs 1        # quicker
    .venv/bin/python bench/run_all.py --history 0,1000000,5000000   # add the 5M-row claim step
    .venv/bin/python bench/run_all.py --only enqueue,drain          # some groups only
    .venv/bin/python bench/run_all.py --baseline ../before          # before/after, same run

Groups (``--only``): enqueue, drain, pickup, lateness, claim, backlog, limit, peers. Every
figure is the median of --runs runs; the table also shows the spread (min-max) because the
machine is shared. The raw-SQL limit (plain psycopg on a copy of the jobs table) and the peers
(django-tasks-db, Procrastinate, pgqueuer; their own virtualenv, see bench/README.md) run in the
same invocation, and each jobqueue figure is printed as a fraction of the limit, as a multiple of
pgqueuer and of the best peer. With ``--baseline PATH`` every jobqueue figure (and the limit) is
measured on this checkout and on PATH, run by run interleaved, and printed side by side with the
ratio (bench/baseline.py). Databases: BENCH_DATABASE_URL (default .../jobqueue_bench; the
baseline's has ``_base`` appended) and
PEERS_DATABASE_URL (default .../jobqueue_peers), both dropped and recreated. The results also go
to bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
sys.path.insert(0, str(HERE))

import baseline  # noqa: E402
import core  # noqa: E402
import figures  # noqa: E402
from figures import GROUPS  # noqa: E402

PEERS = ("django-tasks-db", "procrastinate", "pgqueuer")
PEERS_PYTHON = HERE / ".venv-peers" / "bin" / "python"


def fmt_spread(m: tuple[float, float, float], unit: str = "") -> str:
    median, low, high = m
    if median >= 100:
        return f"{median:,.0f}{unit} ({low:,.0f}-{high:,.0f})"
    return f"{median:.1f}{unit} ({low:.1f}-{high:.1f})"


def run_peers(jobs: int, runs: int, pickup_samples: int) -> dict | None:
    if not PEERS_PYTHON.exists():
        print("peers: bench/.venv-peers is missing (see bench/README.md); skipped", file=sys.stderr)
        return None
    env = {
        **os.environ,
        "PEERS_DATABASE_URL": os.environ.get(
            "PEERS_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_peers"
        ),
    }
    out = subprocess.run(
        [
            str(PEERS_PYTHON),
            str(HERE / "peers" / "run.py"),
            "--jobs",
            str(jobs),
            "--runs",
            str(runs),
            "--pickup-samples",
            str(pickup_samples),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(GROUPS), help="comma-separated groups")
    parser.add_argument("--enqueue-jobs", type=int, default=3000, help="for enqueue 1/txn")
    parser.add_argument("--drain-jobs", type=int, default=20_000)
    parser.add_argument(
        "--drain-concurrency",
        default="default,10,50",
        help="--concurrency values of the drains, comma-separated, 'default' for none given (what "
        "an untuned worker runs); the first is compared with the peers (at their defaults too)",
    )
    parser.add_argument("--pickup-samples", type=int, default=500)
    parser.add_argument("--delayed-jobs", type=int, default=300)
    parser.add_argument(
        "--history",
        default="0,1000000",
        help="retained finished rows for the claim-latency figure, comma-separated",
    )
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--peer-jobs", type=int, default=1000)
    parser.add_argument(
        "--baseline",
        metavar="PATH",
        help="another jobqueue checkout (e.g. a git worktree of an older commit, with or without "
        "its own .venv): measure every jobqueue figure on both, interleaved, side by side",
    )
    parser.add_argument(
        "--table",
        metavar="JSON",
        help="only print the table of a saved run (bench/results/latest.json or partial.json)",
    )
    args = parser.parse_args()
    if args.table:
        saved = json.loads(Path(args.table).read_text())
        core.django_setup()
        saved_args = argparse.Namespace(**saved.pop("args"))
        if "baseline" in saved and "sides" in saved:
            baseline.print_table(saved, saved_args, fmt_spread)
            print_peers(saved.get("peers"), saved_args)
        else:
            print_table(saved, saved_args, load=False)
        return
    only = set(args.only.split(","))
    unknown = only - set(GROUPS)
    if unknown:
        parser.error(f"unknown groups: {', '.join(sorted(unknown))} (known: {', '.join(GROUPS)})")
    runs = args.runs

    core.setup_database()
    core.django_setup()
    results: dict[str, object] = {}
    started = time.monotonic()

    out = HERE / "results"
    out.mkdir(exist_ok=True)

    def step(name: str) -> None:
        # What is measured so far is saved at every step, so a run cut short keeps its figures.
        (out / "partial.json").write_text(json.dumps({"args": vars(args), **results}, indent=1))
        print(f"[{time.monotonic() - started:6.0f} s] {name}", file=sys.stderr, flush=True)

    if args.baseline:
        groups = [g for g in figures.SIDED if g in only]
        baseline.run(args, groups, step, results)
    else:
        for group in (g for g in figures.SIDED if g in only):
            for key, fn, fn_args in figures.figures(group, args):
                step(key)
                results[key] = core.median_of(runs, fn, *fn_args)
    if "peers" in only:
        step("peers")
        results["peers"] = run_peers(args.peer_jobs, runs, args.pickup_samples)
    step("done")
    if args.baseline:
        print_versions()
        baseline.print_table(results, args, fmt_spread)
        print_peers(results.get("peers"), args)
    else:
        print_table(results, args)
    (out / "latest.json").write_text(json.dumps({"args": vars(args), **results}, indent=1))


def print_versions(load: bool = True) -> None:
    import django
    import psycopg

    [(pg,)] = core.sql("SHOW server_version")
    print(
        f"\nPostgreSQL {pg}, Django {django.get_version()}, psycopg {psycopg.__version__}, "
        f"Python {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}"
        + (f", load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end" * load)
    )


def print_table(results: dict, args: argparse.Namespace, load: bool = True) -> None:
    print_versions(load)
    print(f"jobqueue benchmark: median (min-max) of {args.runs} run(s)")
    limit = results.get("limit")
    peers = results.get("peers")

    def vs_limit(value: float, key: str) -> str:
        return f"{value / limit[key][0]:.2f}" if limit else "-"

    def vs_peer(value: float, key: str, names: tuple[str, ...] = PEERS) -> str:
        values = [peers[n][key][0] for n in names if peers and key in peers.get(n, {})]
        return f"{value / max(values):.2f}x" if values else ""

    def vs_pgq(value: float, key: str, index: int | None = None) -> str:
        if not peers or key not in peers.get("pgqueuer", {}):
            return ""
        theirs = peers["pgqueuer"][key] if index is None else peers["pgqueuer"][key][index]
        return f"{value / theirs[0]:.2f}x"

    print(f"{'figure':<58} {'jobqueue':>24} {'/ limit':>8} {'/ pgqueuer':>11} {'/ best peer':>12}")
    rows: list[tuple[str, str, str, str, str]] = []
    if "enqueue" in results:
        v = results["enqueue"]
        rows.append(
            (
                "enqueue, 1 job per transaction (jobs/s)",
                fmt_spread(v),
                vs_limit(v[0], "insert"),
                vs_pgq(v[0], "enqueue"),
                vs_peer(v[0], "enqueue"),
            )
        )
        v = results["enqueue_many"]
        rows.append(
            (
                "enqueue_many of 10,000 (jobs/s)",
                fmt_spread(v),
                vs_limit(v[0], "insert"),
                vs_pgq(v[0], "enqueue_many"),
                "",
            )
        )
    concurrencies = figures.concurrencies(args)
    for concurrency in concurrencies:
        for n in (1, 2):
            if f"drain{n}_c{concurrency}" not in results:
                continue
            wall, span = results[f"drain{n}_c{concurrency}"]
            label = (
                f"drain {args.drain_jobs:,} --burst, {n} process{'es' if n > 1 else ''}"
                f" x {concurrency or 'default'}"
            )
            # The peers run at their defaults (Procrastinate 10 at once, pgqueuer batches of
            # 10): compare the first concurrency (by default jobqueue's default) with them.
            first = concurrency == concurrencies[0]
            rows.append(
                (
                    f"{label} (jobs/s, wall)",
                    fmt_spread(wall),
                    vs_limit(wall[0], "drain"),
                    vs_pgq(wall[0], f"drain{n}") if first else "",
                    vs_peer(wall[0], f"drain{n}") if first else "",
                )
            )
            rows.append(
                (f"{label} (jobs/s, span)", fmt_spread(span), vs_limit(span[0], "drain"), "", "")
            )
    if "pickup" in results:
        p50, p99 = results["pickup"]
        rows.append(
            (
                "pickup, idle worker, LISTEN/NOTIFY: p50 (ms)",
                fmt_spread(p50),
                "",
                vs_pgq(p50[0], "pickup", 0),
                "",
            )
        )
        rows.append(
            (
                "pickup, idle worker, LISTEN/NOTIFY: p99 (ms)",
                fmt_spread(p99),
                "",
                vs_pgq(p99[0], "pickup", 1),
                "",
            )
        )
        p50, p99 = results["pickup_poll"]
        rows.append(
            (
                "pickup, idle worker, polling 1 s: p50 / p99 (ms)",
                f"{p50[0]:.0f} / {p99[0]:.0f}",
                "",
                "",
                "",
            )
        )
    if "lateness" in results:
        p50, p99 = results["lateness"]
        rows.append(("delayed job start - run_at: p50 (ms)", fmt_spread(p50), "", "", ""))
        rows.append(("delayed job start - run_at: p99 (ms)", fmt_spread(p99), "", "", ""))
    claims = sorted((int(k.split("_")[1]), v) for k, v in results.items() if k.startswith("claim_"))
    for history, (p50, p99) in claims:
        base = claims[0][1][0][0]
        rows.append(
            (
                f"claim of 10, {history:,} finished rows: p50 (ms)",
                fmt_spread(p50),
                f"{p50[0] / base:.2f}x" if history else "",
                "",
                "",
            )
        )
        rows.append(
            (f"claim of 10, {history:,} finished rows: p99 (ms)", fmt_spread(p99), "", "", "")
        )
    if "backlog" in results:
        p50, p99 = results["backlog"]
        label = f"ready job start, 2 processes draining {args.backlog:,} of another queue"
        rows.append((f"{label}: p50 (ms)", fmt_spread(p50), "", "", ""))
        rows.append((f"{label}: p99 (ms)", fmt_spread(p99), "", "", ""))
    for label, *cells in rows:
        print(f"{label:<58} {cells[0]:>24} {cells[1]:>8} {cells[2]:>11} {cells[3]:>12}")
    print("/ pgqueuer and / best peer: above 1 is faster for jobs/s, slower for ms.")
    if limit:
        print("\nthe limit (plain psycopg, same machine and run), jobs/s:")
        for key, text in (
            ("insert", "one INSERT per transaction"),
            ("claim", "FOR UPDATE SKIP LOCKED claims of 100"),
            ("ack", "one UPDATE acking 100"),
            ("drain", "claim 100 + ack 100, one connection"),
        ):
            print(f"  {text:<56} {fmt_spread(limit[key]):>24}")
    print_peers(peers, args)


def print_peers(peers: dict | None, args: argparse.Namespace) -> None:
    if not peers:
        return
    versions = ", ".join(f"{k} {v}" for k, v in peers["versions"].items())
    print(f"\npeers ({versions}; drains of {args.peer_jobs:,} jobs), jobs/s:")
    for name in PEERS:
        p = peers.get(name)
        if not p:
            continue
        print(
            f"  {name:<16} enqueue {fmt_spread(p['enqueue']):>22}   drain x1 "
            f"{fmt_spread(p['drain1']):>20}   drain x2 {fmt_spread(p['drain2']):>20}"
        )
    pgq = peers.get("pgqueuer", {})
    if "enqueue_many" in pgq:
        print(f"  pgqueuer batch enqueue of 10,000: {fmt_spread(pgq['enqueue_many'])} jobs/s")
    if "pickup" in pgq:
        p50, p99 = pgq["pickup"]
        print(
            f"  pgqueuer pickup, idle consumer, {args.pickup_samples} jobs 10 ms apart:"
            f" p50 {fmt_spread(p50, ' ms')}, p99 {fmt_spread(p99, ' ms')}"
        )


if __name__ == "__main__":
    main()

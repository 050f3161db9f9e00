"""Measure one ``run_all.py`` group once on one jobqueue checkout; print its figures as JSON.

    python bench/measure.py --setup                         # recreate and migrate the database
    python bench/measure.py --group drain --args '{...}'    # one run of the group's figures
    python bench/measure.py --group drain --figure drain2_c10 --args '{...}'   # one of them

Internal to ``run_all.py --baseline``, which runs it with each side's Python and
``BENCH_JOBQUEUE_ROOT`` (the checkout whose ``jobqueue`` and ``tests`` are imported, here and in
the workers) and ``BENCH_DATABASE_URL`` (that side's database). The measuring code is always this
bench/ directory's, so both sides are measured the same way. Refuses to run if ``jobqueue`` is
imported from anywhere but ``BENCH_JOBQUEUE_ROOT``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import core
import figures
from _common import ROOT


def check_source() -> str:
    """Return the directory ``jobqueue`` is imported from; exit if it is not under ROOT."""
    import jobqueue

    source = Path(jobqueue.__file__).resolve().parent
    if not source.is_relative_to(ROOT):
        raise SystemExit(f"measure: jobqueue comes from {source}, not from {ROOT}")
    return str(source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="recreate the database, then exit")
    parser.add_argument("--group", choices=figures.SIDED)
    parser.add_argument("--figure", help="only this figure of the group (its result key)")
    parser.add_argument("--args", default="{}", help="run_all.py's options, as JSON")
    args = parser.parse_args()
    if args.setup:
        core.setup_database()
        core.django_setup()
        print(json.dumps({"jobqueue": check_source()}))
        return
    if not args.group:
        parser.error("--group or --setup")
    core.django_setup()
    check_source()
    sizes = argparse.Namespace(**json.loads(args.args))
    result = {
        key: fn(*fn_args)
        for key, fn, fn_args in figures.figures(args.group, sizes)
        if args.figure in (None, key)
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

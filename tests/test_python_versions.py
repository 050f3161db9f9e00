"""Python 3.10 and 3.11 are supported with Django 5.2 LTS (3.12+ with Django 6).

``.ci/test``'s older-Python stage runs the suite's fast half on 3.10 (else 3.11); these are the
places where the standard library differs before 3.11, held on every interpreter.
"""

from __future__ import annotations

import configparser
from pathlib import Path

from jobqueue.admin.display import history_time

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_says_which_pythons_it_supports():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert setup["options"]["python_requires"] == ">=3.10"
    classifiers = setup["metadata"]["classifiers"]
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}\n" in classifiers + "\n"


def test_a_history_time_postgresql_wrote_is_read_before_python_3_11():
    # PostgreSQL's to_json trims trailing zeros: 1-5 fractional digits, which
    # datetime.fromisoformat refuses on Python 3.10.
    shown = str(history_time("2026-12-06T05:55:00.12345+00:00"))
    assert "2026-12-06 05:55:00" in shown
    assert str(history_time("not a time")) == "not a time"

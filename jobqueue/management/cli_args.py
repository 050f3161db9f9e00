"""Internal: argparse types, filter flags and database refusals of ``manage.py jobqueue``.

Each type raises ``argparse.ArgumentTypeError`` naming the bad value, so argparse prints
``argument --state: ...`` with the flag and exits with status 2 before anything runs.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

from django.core.management.base import CommandError

from jobqueue.ops.health import THRESHOLD_RANGE_SECONDS
from jobqueue.ops.jobs import STATES

#: Largest job id (bigint).
MAX_JOB_ID = 2**63 - 1
#: Most rows ``jobs --limit`` lists.
MAX_LIMIT = 10_000


def text_arg(text: str) -> str:
    """Parse a name or other text argument (a queue, type, tenant, alias, user, reason, host).

    The shell hands Python the bytes of an argument that are not valid UTF-8 as lone
    surrogates (byte 0xff arrives as U+DCFF), which no database, log or terminal can take: a
    ``UnicodeEncodeError`` traceback later, not a usage error now (issue 33). NUL is refused
    too, as PostgreSQL text cannot hold it.

    Raises:
        argparse.ArgumentTypeError: the text is not valid UTF-8 or holds NUL, naming it.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(
            f"expected text in UTF-8, got {text!a} (bytes that are not UTF-8)"
        ) from None
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"expected text without NUL, got {text!a}")
    return text


def job_id_arg(text: str) -> int:
    """Parse a job id: a whole number in 1..2**63-1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a job id (a whole number), got {text!r}"
        ) from None
    if not 1 <= value <= MAX_JOB_ID:
        raise argparse.ArgumentTypeError(f"expected a job id from 1 to {MAX_JOB_ID}, got {text!r}")
    return value


def limit_arg(text: str) -> int:
    """Parse ``--limit``: a whole number in 1..MAX_LIMIT."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 1 to {MAX_LIMIT}, got {text!r}"
        )
    return value


def seconds_arg(flag: str) -> Callable[[str], float]:
    """Return the type of a threshold flag: seconds in THRESHOLD_RANGE_SECONDS."""
    low, high = THRESHOLD_RANGE_SECONDS

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # NaN fails too
            raise argparse.ArgumentTypeError(
                f"expected seconds from {low:g} to {high:g}, got {text!r}"
            )
        return value

    parse.__name__ = flag.lstrip("-").replace("-", "_")
    return parse


def state_arg(allowed: Sequence[str]) -> Callable[[str], str]:
    """Return the type of ``--state``: one of ``allowed``, named in the error."""

    def parse(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(allowed)}, got {text!r}")
        return text

    parse.__name__ = "state"
    return parse


def add_filters(parser: argparse.ArgumentParser, states: Sequence[str] = STATES) -> None:
    """Add --queue, --state, --type and --tenant to ``parser`` (``states``: what --state takes)."""
    parser.add_argument("--queue", type=text_arg, help="only this queue")
    parser.add_argument(
        "--state", type=state_arg(list(states)), help=f"only this state: {', '.join(states)}"
    )
    parser.add_argument("--type", type=text_arg, help="only this job type (its full name)")
    parser.add_argument("--tenant", type=text_arg, help="only this tenant id ('' for none)")


def add_actor(parser: argparse.ArgumentParser) -> None:
    """Add ``--as USER`` (``--by`` too, its older name): who acts, for the record."""
    parser.add_argument(
        "--as",
        "--by",
        dest="actor",
        type=text_arg,
        default=None,
        metavar="USER",
        help="who acts, for the job history and, when a Django user has this user name, the "
        "admin's LogEntry (default: the OS user)",
    )


def refuse_ambiguous(what: str, ambiguous: dict[int, list[str]]) -> None:
    """Refuse (exit 2) ids found on two or more databases: act on none rather than guess."""
    if ambiguous:
        where = "; ".join(f"{i} on {', '.join(a)}" for i, a in sorted(ambiguous.items()))
        raise CommandError(
            f"{what} ids are per database and these are on more than one: {where}; "
            "name one with --database ALIAS (nothing done)",
            returncode=2,
        )


def looked_on(aliases: tuple[str, ...]) -> str:
    """Return where an id was looked for, when on more than one database."""
    return f" on {', '.join(aliases)}" if len(aliases) > 1 else ""

"""Internal: argparse types, filter flags and database refusals of jobqueue's management commands.

Each type raises ``argparse.ArgumentTypeError`` naming the bad value, so argparse prints
``argument --state: ...`` with the flag and the command exits with status 2 and a usage line
before doing anything. The filter flags and the refusals are ``manage.py jobqueue``'s.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

from django.core.management.base import CommandError

from jobqueue.ops.health import THRESHOLD_RANGE_SECONDS
from jobqueue.ops.jobs import STATES
from jobqueue.settings import ranges as limits
from jobqueue.settings.queues import parse_queue_spec


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


def in_range(flag: str) -> Callable[[str], float]:
    """Return an argparse type for ``flag``, checked against the range of the setting it overrides.

    Args:
        flag: the flag, a key of :data:`jobqueue.settings.ranges.FLAGS` (``"--lease"``).

    Returns:
        A function of the flag's text that returns the number (``int`` for counts) or raises
        ``argparse.ArgumentTypeError`` naming the range and the text (NaN, infinity, negative
        and out-of-range values included).
    """
    key = limits.FLAGS[flag]
    limit = limits.RANGES[key]

    def parse(text: str) -> float:
        try:
            value: float = int(text) if limit.integer else float(text)
        except ValueError:
            kind = "a whole number" if limit.integer else "a number"
            raise argparse.ArgumentTypeError(
                f"expected {kind} in {limit.describe()}, got {text!r}"
            ) from None
        try:
            return limits.check(key, value, "value")
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {limit.describe()} (the range of {key}), got {text!r}"
            ) from None

    parse.__name__ = flag.lstrip("-").replace("-", "_")
    return parse


def queue_spec(text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Parse ``critical:6,default:3,bulk`` or ``critical:6,*`` into queue names and weights.

    A weight not given is 1; a last ``*`` item means every other queue, now and later.
    """
    try:
        return parse_queue_spec(text, every=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def queue_names(text: str) -> tuple[str, ...]:
    """Parse ``bulk,reports``: queue names as ``--queues`` writes them, without weights or ``*``.

    Raises:
        argparse.ArgumentTypeError: an empty or invalid name, a name given twice, or a weight.
    """
    try:
        names, _ = parse_queue_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    weighted = [item.strip() for item in text.split(",") if item.strip() not in names]
    if weighted:
        raise argparse.ArgumentTypeError(f"queue names only, no weights: got {weighted[0]!r}")
    return names


#: Longest worker id: the width of ``Worker.worker_id`` and ``Job.leased_by``.
MAX_WORKER_ID_LENGTH = 200


def worker_id_text(text: str) -> str:
    """Parse a worker id: 1 to 200 characters, not all blank, no control characters.

    The id is written to the Worker row and to every claimed job's ``leased_by``. A longer one,
    or one with a NUL, makes each of those writes fail in the database, and the worker would
    retry them forever as if the database were down; refuse it here instead. An empty or blank
    one names no worker (an empty one was silently replaced by the default): refused too.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a worker id, got {text!r}")
    if len(text) > MAX_WORKER_ID_LENGTH:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_WORKER_ID_LENGTH} characters, got {len(text)}: {text[:40]!r}..."
        )
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"expected no control characters, got {text!r}")
    return text


#: Largest job id (bigint).
MAX_JOB_ID = 2**63 - 1
#: Most rows ``jobs --limit`` lists.
MAX_LIMIT = 10_000


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


def add_django_options(parser: argparse.ArgumentParser) -> None:
    """Add Django's own command options to a verb's parser, so they may follow the verb.

    ``manage.py jobqueue status --settings X``: Django reads ``--settings`` and
    ``--pythonpath`` from anywhere on the line before the command runs, but argparse refused
    them after a verb (issue 31). Their defaults are suppressed, so the values given before the
    verb stand when none is given after it.
    """
    keep = argparse.SUPPRESS
    parser.add_argument("-v", "--verbosity", type=int, choices=[0, 1, 2, 3], default=keep)
    parser.add_argument("--settings", default=keep, help=argparse.SUPPRESS)
    parser.add_argument("--pythonpath", default=keep, help=argparse.SUPPRESS)
    parser.add_argument("--traceback", action="store_true", default=keep, help=argparse.SUPPRESS)
    parser.add_argument("--no-color", action="store_true", default=keep, help=argparse.SUPPRESS)
    parser.add_argument("--force-color", action="store_true", default=keep, help=argparse.SUPPRESS)
    parser.add_argument("--skip-checks", action="store_true", default=keep, help=argparse.SUPPRESS)

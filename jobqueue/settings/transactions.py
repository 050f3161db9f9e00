"""The ``TRANSACTION_LIMITS`` setting: time limits on every transaction jobqueue opens itself.

A leaf (imports only ``limits``, whose table holds the ranges): ``conf`` reads the
setting with :func:`parse_transaction_limits`,
``store/bounded.py`` applies it. Why these limits and these defaults: docs/decisions.md,
"Bounded transactions".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from jobqueue.settings import ranges as limits

DEFAULT_LOCK_TIMEOUT_SECONDS = 5.0
"""Longest one of jobqueue's statements waits for a lock (the capped claim's turn, a row)."""

DEFAULT_STATEMENT_TIMEOUT_SECONDS = 10.0
"""Longest one of jobqueue's statements runs. Its statements take milliseconds; this is below the
default heartbeat interval (10 s), so a stuck heartbeat fails and the next one is tried while the
lease still holds."""

DEFAULT_IDLE_IN_TRANSACTION_SECONDS = 5.0
"""Longest one of jobqueue's transactions may sit idle between statements before the server ends
the session (and with it the transaction and its locks): a frozen or cut-off process holds
nothing for longer than this."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLimits:
    """Limits on jobqueue's own transactions (``JOBQUEUE["TRANSACTION_LIMITS"]``), seconds.

    Attributes:
        lock_timeout_seconds: PostgreSQL ``lock_timeout``.
        statement_timeout_seconds: PostgreSQL ``statement_timeout``.
        idle_in_transaction_seconds: PostgreSQL ``idle_in_transaction_session_timeout``.
    """

    lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS
    statement_timeout_seconds: float = DEFAULT_STATEMENT_TIMEOUT_SECONDS
    idle_in_transaction_seconds: float = DEFAULT_IDLE_IN_TRANSACTION_SECONDS

    def as_params(self) -> dict[str, str]:
        """Return the limits as PostgreSQL settings: name -> value (milliseconds, text).

        ``store/bounded.py`` sets them transaction-locally (``limit_transaction.sql``).
        """
        return {
            "lock_timeout": _ms(self.lock_timeout_seconds),
            "statement_timeout": _ms(self.statement_timeout_seconds),
            "idle_in_transaction_session_timeout": _ms(self.idle_in_transaction_seconds),
        }


def _ms(seconds: float) -> str:
    return str(max(1, round(seconds * 1000)))


def parse_transaction_limits(
    value: Any, where: str = "JOBQUEUE['TRANSACTION_LIMITS']"
) -> TransactionLimits:
    """Validate a ``TRANSACTION_LIMITS`` dict (keys of :class:`TransactionLimits`, seconds).

    Raises:
        JobQueueConfigurationError: not a dict, an unknown key, or a value that is not a
            number within its range (``jobqueue.settings.ranges.RANGES``), naming the key.
    """
    known = asdict(TransactionLimits())
    limits.section(value, where, known)
    return TransactionLimits(
        **{
            key: limits.setting(f"TRANSACTION_LIMITS.{key}", number, f"{where}[{key!r}]")
            for key, number in value.items()
        }
    )

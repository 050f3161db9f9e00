"""Internal: who an operator is, for the record of what they did (a pause's ``paused_by``)."""

from __future__ import annotations

import getpass


def operator_name() -> str:
    """Return the OS user running this process, or ``""`` when the system cannot tell.

    ``getpass.getuser`` reads ``LOGNAME``/``USER``/``LNAME``/``USERNAME``, then the password
    database; a container user with no entry there raises ``OSError`` (``KeyError`` before
    Python 3.13).
    """
    try:
        return getpass.getuser()[:200]
    except (OSError, KeyError):
        return ""

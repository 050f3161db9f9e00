"""Internal: the metrics of several queue databases as one exposition, each sample labelled.

Each queue database keeps its own shared reading of the gauges (``jobqueue.metrics``: a row of
its ``jobqueue_gaugesnapshot``), computed from its own tables and label-free. A scrape with
queues on several databases merges those texts: every sample gains a ``database`` label (the
alias), and each family's ``# HELP`` and ``# TYPE`` are written once, its samples together, as
the text format requires.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["DATABASE_LABEL", "labelled", "merge"]

#: The label naming a sample's queue database.
DATABASE_LABEL = "database"

# A sample line starts with its metric name, then its labels ("{...}") or a space.
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def labelled(line: str, alias: str) -> str:
    """Return the sample ``line`` with ``database="alias"`` as its first label.

    Args:
        line: one sample line of the text format (``name{labels} value`` or ``name value``).
        alias: the database alias.
    """
    match = _NAME.match(line)
    end = match.end() if match else 0
    label = f'{DATABASE_LABEL}="{_escape(alias)}"'
    if line[end : end + 2] == "{}":
        return f"{line[:end]}{{{label}}}{line[end + 2 :]}"
    if line[end : end + 1] == "{":
        return f"{line[:end]}{{{label},{line[end + 1 :]}"
    return f"{line[:end]}{{{label}}}{line[end:]}"


def merge(bodies: Sequence[tuple[str, str]]) -> str:
    """Merge ``(alias, text)`` expositions into one, each sample labelled with its alias.

    Families keep the order of their first appearance; within one, the samples keep the
    order of ``bodies``.

    Args:
        bodies: each queue database's alias and its exposition text (label-free).

    Returns:
        One exposition text, ending with a newline (empty when there is nothing).
    """
    heads: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for alias, body in bodies:
        current = ""
        for line in body.splitlines():
            if line.startswith(("# HELP ", "# TYPE ")):
                current = line.split(" ", 3)[2]
                head = heads.setdefault(current, [])
                samples.setdefault(current, [])
                if line not in head and not any(h[:7] == line[:7] for h in head):
                    head.append(line)
            elif line and not line.startswith("#"):
                samples.setdefault(current, []).append(labelled(line, alias))
                heads.setdefault(current, [])
    out = [line for name in heads for line in (*heads[name], *samples[name])]
    return "\n".join(out) + "\n" if out else ""

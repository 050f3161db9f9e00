"""Internal: the Prometheus text format: families written, and several databases' merged.

:func:`family` and :func:`histogram` write one family (HELP, TYPE, samples; label values masked
with ``jobqueue.masking`` and escaped). The metrics of several queue databases are one
exposition, each sample labelled:

Each queue database keeps its own shared reading of the gauges (``jobqueue.metrics``: a row of
its ``jobqueue_gaugesnapshot``), computed from its own tables and label-free. A scrape with
queues on several databases merges those texts: every sample gains a ``database`` label (the
alias), and each family's ``# HELP`` and ``# TYPE`` are written once, its samples together, as
the text format requires.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from jobqueue.masking import mask_text

__all__ = ["DATABASE_LABEL", "Sample", "family", "histogram", "labelled", "merge"]

Sample = tuple[dict[str, str], float]

#: The label naming a sample's queue database.
DATABASE_LABEL = "database"

# A sample line starts with its metric name, then its labels ("{...}") or a space.
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


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


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help(text: str) -> str:
    # HELP text escapes backslash and newline only: a quote there is a parse error.
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(labels: dict[str, str]) -> str:
    # Label values are masked as every output is (a concurrency key or tenant "token=...").
    return ",".join(f'{k}="{_escape(v if k == "le" else mask_text(v))}"' for k, v in labels.items())


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def family(name: str, help_text: str, samples: Iterable[Sample], kind: str = "gauge") -> list[str]:
    """Return the lines of one gauge or counter family: HELP, TYPE and a line per sample.

    Args:
        name: the metric name (a counter's ends in ``_total``).
        help_text: one line saying what it measures, with its unit.
        samples: ``(labels, value)`` pairs; label values are masked and escaped here.
        kind: ``"gauge"`` or ``"counter"``.
    """
    lines = [f"# HELP {name} {_help(help_text)}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        text = _labels(labels)
        lines.append(f"{name}{{{text}}} {_number(value)}" if text else f"{name} {_number(value)}")
    return lines


def histogram(
    name: str,
    help_text: str,
    series: Iterable[tuple[dict[str, str], Sequence[tuple[str, float]], float, float]],
) -> list[str]:
    """Return the lines of one histogram family: ``_bucket{le}``, ``_sum`` and ``_count``.

    Args:
        name: the metric name (without the suffixes).
        help_text: one line saying what it measures, with its unit.
        series: per label set, its cumulative ``(le, count)`` buckets (``+Inf`` last), its
            sum and its count.
    """
    lines = [f"# HELP {name} {_help(help_text)}", f"# TYPE {name} histogram"]
    for labels, buckets, total, count in series:
        for le, n in buckets:
            lines.append(f"{name}_bucket{{{_labels({**labels, 'le': le})}}} {_number(n)}")
        text = _labels(labels)
        tail = f"{{{text}}}" if text else ""
        lines.append(f"{name}_sum{tail} {_number(total)}")
        lines.append(f"{name}_count{tail} {_number(count)}")
    return lines

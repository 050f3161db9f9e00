"""Internal: parsers of the ``JOBQUEUE`` settings that are lists of names (a leaf module).

``DISCOVER_MODULES``, ``ADMIN_MASKED_KEYS`` and ``ENQUEUE_UNREGISTERED``;
:mod:`jobqueue.settings.conf`
builds the settings with them. Each refuses a bare string, a common slip for a list of one.
"""

from __future__ import annotations

from typing import Any

from jobqueue.errors import JobQueueConfigurationError

__all__ = ["parse_discover_modules", "parse_enqueue_unregistered", "parse_masked_keys"]


def _list(key: str, value: Any, what: str) -> list[Any]:
    """Return ``value`` as a list; a bare string (a common slip for a list of one) is refused."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise JobQueueConfigurationError(
            f"JOBQUEUE[{key!r}] must be a list of {what}, got {value!r}"
        )
    return list(value)


def parse_discover_modules(value: Any) -> tuple[str, ...]:
    """Validate ``JOBQUEUE["DISCOVER_MODULES"]``: a list of dotted module names, maybe empty.

    Each name is imported relative to every installed app (``"jobs"`` imports ``shop.jobs``);
    an empty list turns discovery off.

    Raises:
        JobQueueConfigurationError: not a list or tuple, or a name that is not a dotted Python
            identifier.
    """
    names = _list("DISCOVER_MODULES", value, "module names")
    for name in names:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise JobQueueConfigurationError(
                "JOBQUEUE['DISCOVER_MODULES'] entries must be dotted module names like 'jobs', "
                f"got {name!r}"
            )
    return tuple(dict.fromkeys(names))


def parse_masked_keys(value: Any) -> tuple[str, ...]:
    """Validate ``ADMIN_MASKED_KEYS``: a list or tuple of non-empty strings, lower-cased.

    Raises:
        JobQueueConfigurationError: a bare string (a common slip), or an item that is not a
            non-empty string.
    """
    items = _list("ADMIN_MASKED_KEYS", value, "key names")
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise JobQueueConfigurationError(
                f"JOBQUEUE['ADMIN_MASKED_KEYS'] items must be non-empty strings, got {item!r}"
            )
    return tuple(item.strip().lower() for item in items)


def parse_enqueue_unregistered(value: Any) -> tuple[str, ...]:
    """Validate ``JOBQUEUE["ENQUEUE_UNREGISTERED"]``: True, False, or a list of name prefixes.

    Returns:
        The type-name prefixes enqueue accepts without a registered handler: ``()`` for False
        (the default: every type must be registered), ``("",)`` for True (any name).

    Raises:
        JobQueueConfigurationError: not a bool or a list, or a prefix that is not a non-empty
            string.
    """
    if isinstance(value, bool):
        return ("",) if value else ()
    where = "JOBQUEUE['ENQUEUE_UNREGISTERED']"
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise JobQueueConfigurationError(
            f"{where} must be True, False or a list of job type name prefixes like "
            f"['billing.'], got {value!r}"
        )
    for prefix in value:
        if not isinstance(prefix, str) or not prefix:
            raise JobQueueConfigurationError(
                f"{where} prefixes must be non-empty strings, got {prefix!r}"
            )
    return tuple(dict.fromkeys(value))

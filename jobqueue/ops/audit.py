"""Who did an operator action, and its record in Django's admin history (``LogEntry``).

Every operator call of the API (``cancel``, ``retry``, ``retry_many``, ``run_now``, ``pause``,
``resume`` and their ``_type`` twins) takes ``by``: who acts. A Django user object (the admin
passes ``request.user``) is recorded twice: by its user name in the job's history (or the
pause's ``paused_by``), and as a ``LogEntry`` row with that user, which the admin's "History"
page of the job shows. A plain name (``by="cron-script"``) is recorded in the job's history only:
a ``LogEntry`` needs a user. ``manage.py jobqueue`` resolves its ``--as`` name (default: the OS
user) to the Django user of that user name when one exists (:func:`resolve`).

Without ``django.contrib.admin`` installed there is no ``LogEntry``: the history is all.

Who an operator is when no user is given (a pause's ``paused_by`` from the command line) is
:func:`operator_name`.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import router
from django.utils import timezone

from jobqueue import arguments
from jobqueue.errors import InvalidJobOption

__all__ = ["ADDITION", "CHANGE", "DELETION", "actor_name", "is_user", "log", "resolve"]

#: ``LogEntry.action_flag`` values (django.contrib.admin.models: ADDITION, CHANGE, DELETION).
ADDITION, CHANGE, DELETION = 1, 2, 3


def is_user(by: Any) -> bool:
    """Return True if ``by`` is a Django user object (what a ``LogEntry`` can name)."""
    return hasattr(by, "get_username") and hasattr(by, "pk")


def actor_name(by: Any) -> str:
    """Return the name recorded for ``by``: a user's user name, a name as given, or ``""``.

    Args:
        by: a Django user object, a name (at most 200 characters), or None.

    Raises:
        InvalidJobOption: ``by`` is neither (naming what it is).
    """
    if by is None:
        return ""
    if is_user(by):
        return str(by.get_username())[:200]
    if not isinstance(by, str):
        raise InvalidJobOption("by", f"must be a user or a name, got {type(by).__name__}")
    return arguments.text("by", by, 200) or ""


def resolve(name: str) -> Any:
    """Return the Django user whose user name is ``name``, or ``name`` itself if none is.

    For the command line: ``--as alice`` acts as the user alice when the site has one (then a
    ``LogEntry`` records it), else as the name alone.
    """
    if not name or not apps.is_installed("django.contrib.auth"):
        return name
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: name}).first()
    return user if user is not None else name


def log(by: Any, model: type, objects: Iterable[tuple[Any, str]], flag: int, message: str) -> int:
    """Write one ``LogEntry`` per object when ``by`` is a user; return how many were written.

    Args:
        by: who acted (only a user object is logged; a name or None writes nothing).
        model: the model the objects are of (``Job``, ``Pause``), for the content type.
        objects: ``(primary key, text shown for the object)`` pairs.
        flag: :data:`ADDITION`, :data:`CHANGE` or :data:`DELETION`.
        message: the change message ("Retried by operator.").
    """
    if not is_user(by) or by.pk is None or not apps.is_installed("django.contrib.admin"):
        return 0
    log_entry = apps.get_model("admin", "LogEntry")
    content_type = apps.get_model("contenttypes", "ContentType")
    alias = router.db_for_write(log_entry)
    kind = content_type.objects.db_manager(alias).get_for_model(model, for_concrete_model=False)
    now = timezone.now()
    rows = [
        log_entry(
            action_time=now,
            user_id=by.pk,
            content_type_id=kind.pk,
            object_id=str(pk),
            object_repr=text[:200],
            action_flag=flag,
            change_message=message,
        )
        for pk, text in objects
    ]
    log_entry.objects.using(alias).bulk_create(rows)
    return len(rows)


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

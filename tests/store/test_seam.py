"""The store seam is one seam: one Protocol, whole in both stores, holding what callers use.

``jobqueue.store.Store`` is what every caller types against (mypy checks the stores against it
in ``get_store``). These tests check what mypy does not: that both stores take the *same*
parameters for every member (names, kinds, defaults, annotations), that neither store grows a
public method outside the seam (a method added to one store only, or one only tests call), and
that every store attribute jobqueue's own code reads is a member of the seam, and that queue
state is written nowhere else (no ORM writes outside ``store/``; no admin deletes by itself).
No database.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import RequestFactory

import jobqueue
from jobqueue import models
from jobqueue.store import Store
from jobqueue.store.postgres import PostgresStore
from jobqueue.store.sqlite import GenericStore

STORES = [PostgresStore, GenericStore]

#: Public store methods that are no part of the seam: each store's own step of another member.
INTERNAL: set[str] = set()  # none: expired_leases, reap's first half, is in the interface


def seam_members() -> set[str]:
    """Return the names of the methods of ``Store`` and of every Protocol it is composed of."""
    return {
        name
        for part in Store.__mro__
        if getattr(part, "_is_protocol", False)
        for name, value in vars(part).items()
        if callable(value) and not name.startswith("_")
    }


def public_methods(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def store_attributes_used() -> dict[str, set[str]]:
    """Return ``{attribute: {module paths}}`` read on a store by jobqueue outside ``store/``.

    A store is ``store``, ``self.store``, ``get_store(...)`` or ``cron_store(...)``.
    """
    root = Path(jobqueue.__file__).parent
    used: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("store/", "migrations/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and _is_store(node.value):
                used.setdefault(node.attr, set()).add(rel)
    return used


def _is_store(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "store"
    if isinstance(node, ast.Attribute):
        return node.attr == "store" and isinstance(node.value, ast.Name)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in {"get_store", "cron_store"}
    return False


def test_the_seam_holds_every_part_its_callers_use():
    used = store_attributes_used()
    assert used, "the scan found no store use at all"
    # The parts issue 14 names: jobs, operator, cron, dependencies, worker registry.
    for member in ("claim", "retry_many", "fire_cron", "claim_probe", "register_worker", "pause"):
        assert member in used
    missing = {name: sorted(paths) for name, paths in used.items() if name not in seam_members()}
    missing.pop("alias", None)  # an attribute of the seam, not a method
    assert missing == {}


@pytest.mark.parametrize("store_class", STORES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("member", sorted(seam_members()))
def test_each_store_takes_the_seams_parameters(store_class, member):
    expected = inspect.signature(getattr(Store, member))
    assert str(inspect.signature(getattr(store_class, member))) == str(expected)


@pytest.mark.parametrize("store_class", STORES, ids=lambda c: c.__name__)
def test_a_store_has_no_public_method_outside_the_seam(store_class):
    assert public_methods(store_class) - seam_members() == INTERNAL


def test_both_stores_have_the_same_public_methods():
    assert public_methods(PostgresStore) == public_methods(GenericStore)


def test_store_carries_its_alias():
    assert "alias" in Store.__annotations__
    for store_class in STORES:
        assert store_class("default").alias == "default"


#: Queue state: the store writes these rows, nothing else does.
QUEUE_MODELS = {
    models.Job,
    models.DeadLetter,
    models.Worker,
    models.CronEntry,
    models.CronFire,
    models.LeaderLease,
    models.DependencyBreaker,
    models.RetryBudget,
    models.Pause,
}
ORM_WRITES = {
    "update",
    "delete",
    "save",
    "create",
    "bulk_create",
    "bulk_update",
    "update_or_create",
    "get_or_create",
}


def _chain_names(node: ast.expr) -> set[str]:
    """Return the attribute names and called names along ``a.b(...).c``."""
    names: set[str] = set()
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
            node = node.value
        else:
            if isinstance(node, ast.Name):
                names.add(node.id)
            return names


def test_no_orm_write_of_queue_state_outside_the_store():
    root = Path(jobqueue.__file__).parent
    queue_names = {m.__name__ for m in QUEUE_MODELS}
    found = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("store/", "migrations/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            chain = _chain_names(node.func.value)
            if node.func.attr in ORM_WRITES and "objects" in chain and chain & queue_names:
                found.append(f"{rel}:{node.lineno}")
            if node.func.attr == "cursor":  # raw SQL belongs to the store
                found.append(f"{rel}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize(
    "model_admin",
    [a for m, a in admin.site._registry.items() if m in QUEUE_MODELS],
    ids=lambda a: type(a).__name__,
)
def test_an_admin_of_queue_state_deletes_through_the_store_or_not_at_all(model_admin):
    request = RequestFactory().get("/")
    request.user = User(username="root", is_active=True, is_superuser=True)
    if not model_admin.has_delete_permission(request):
        return
    cls = type(model_admin)
    assert cls.delete_model is not admin.ModelAdmin.delete_model
    assert cls.delete_queryset is not admin.ModelAdmin.delete_queryset

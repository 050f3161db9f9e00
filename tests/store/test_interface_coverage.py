"""The conformance suite calls every operation of the store interface, by name.

The suite is ``StoreContract`` (test_contract.py) and the parts mixed into it
(``contract_*.py``), run by both stores' classes. An operation the suite never calls is one
whose contract neither store is held to: declare it and test it together. No database.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from jobqueue.store.interface import Store

SUITE = Path(__file__).parent


def operations() -> list[str]:
    return sorted(
        name
        for name, member in vars(Store).items()
        if inspect.isfunction(member) and not name.startswith("_")
    )


def suite_source() -> str:
    files = [SUITE / "test_contract.py", *sorted(SUITE.glob("contract_*.py"))]
    return "\n".join(path.read_text() for path in files)


def test_the_interface_declares_the_operations_it_is_counted_by():
    assert len(operations()) >= 70


def test_the_conformance_suite_calls_every_operation_of_the_interface():
    source = suite_source()
    never = [name for name in operations() if not re.search(rf"\.{name}\(", source)]
    assert never == [], f"operations the conformance suite never calls: {never}"


def test_both_stores_run_the_whole_suite():
    from tests.store import test_contract

    for cls in (test_contract.TestPostgresStore, test_contract.TestGenericStore):
        assert issubclass(cls, test_contract.StoreContract)
    parts = {base.__name__ for base in test_contract.StoreContract.__mro__}
    for path in SUITE.glob("contract_*.py"):
        names = re.findall(r"^class (\w+Contract)\b", path.read_text(), re.M)
        assert names and set(names) <= parts, f"{path.name} is not mixed into StoreContract"

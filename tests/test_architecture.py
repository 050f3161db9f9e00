"""The architecture as written is the architecture as built: ``docs/architecture.md`` kept true.

* Every module of ``jobqueue/`` (migrations aside) belongs to one part (:data:`PARTS`), and imports
  only the parts its own part may import (:data:`ARROWS`), counting function-level and
  ``TYPE_CHECKING`` imports: a new module, or an import across a boundary, fails here until the
  table (and the page, which mirrors it) says where it stands.
* The page's table is this table: same parts, same modules, same arrows.
* Every ``jobqueue/...`` path and every dotted ``jobqueue.x.y`` name the page names exists.

No database: the name check imports modules (Django is set up by pytest-django).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jobqueue"
DOC = ROOT / "docs" / "architecture.md"

#: The parts of jobqueue, lowest first: each part's module prefixes (dotted, under ``jobqueue.``).
#: Most parts are folders; a module belongs to the part of its longest matching prefix (so
#: ``worker.context``, what a handler is told, sits with the registry below the rest of ``worker``).
PARTS: dict[str, set[str]] = {
    "leaves": {
        "states",
        "errors",
        "validation",
        "signals",
        "payloads",
        "history",
        "retries",
        "flows.status",
        "tracing",
    },
    "settings": {"settings", "arguments", "routing", "masking", "logging"},
    "schema": {"models"},
    "registry": {
        "registry",
        "worker.context",
        "limits.concurrency",
        "ops.audit",
    },
    "store": {"store"},
    "limits": {"limits"},
    "consumer": {"consumer", "worker", "maintenance"},
    "producers": {
        "client",
        "options",
        "flows",
        "cron",
        "tasks",
        "backends",
        "outbox",
        "ops.repairs",
    },
    "surfaces": {
        "admin",
        "management",
        "ops",
        "metrics",
        "checks",
        "routers",
        "apps",
        "__main__",
    },
    "api": {""},
}

#: Which parts each part may import (its own included). An arrow not here is a boundary crossed.
ARROWS: dict[str, set[str]] = {
    "leaves": {"leaves"},
    "settings": {"leaves", "settings"},
    "schema": {"leaves", "settings", "schema"},
    "registry": {"leaves", "settings", "registry"},
    "store": {"leaves", "settings", "schema", "store"},
    "limits": {"leaves", "settings", "schema", "registry", "store", "limits"},
    "consumer": {"leaves", "settings", "schema", "registry", "store", "limits", "consumer"},
    "producers": {"leaves", "settings", "schema", "registry", "store", "producers"},
    "surfaces": {
        "leaves",
        "settings",
        "schema",
        "registry",
        "store",
        "limits",
        "consumer",
        "producers",
        "surfaces",
    },
    "api": set(),
}

#: Arrows outside the table, each with its reason: (importer, imported) -> why.
EXCEPTIONS: dict[tuple[str, str], str] = {}

#: Arrows the table allows between parts but one module must not take: (importer, imported
#: prefix) -> why. The importer is a module or a package and all below it; the imported, a
#: module or package and all below it, except the value-type modules in :data:`VALUES`.
FORBIDDEN: dict[tuple[str, str], str] = {
    ("jobqueue.worker.executor", "jobqueue.store"): (
        "the executor turns one run into an outcome with no SQL: it reads the claimed job's value "
        "type from the store and the completer writes"
    ),
    ("jobqueue.admin", "jobqueue.store"): (
        "the admin reads models and acts through the operator API (jobqueue/ops/), never the store"
    ),
}

#: The store's value types: importing them is not reaching the store's SQL.
VALUES = {"jobqueue.store.interface", "jobqueue.store.plan"}

#: Packages that only their own modules import (Django discovers them: admin.autodiscover and
#: the management-command loader).
PRIVATE = ("jobqueue.admin", "jobqueue.management")


def module_name(path: Path) -> str:
    """Return the dotted name of the module at ``path`` (a package's ``__init__``: the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Return every module of ``jobqueue/`` but the migrations: dotted name -> path."""
    return {
        module_name(path): path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.relative_to(PACKAGE).parts
    }


MODULES = modules()


def imports_of(name: str, path: Path) -> set[str]:
    """Return the jobqueue modules ``name`` imports anywhere in its body (any depth).

    ``from X import y`` counts as importing ``X.y`` when that is a module, else ``X``.
    """
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "jobqueue")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.split(".")[0] != "jobqueue":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in MODULES else source)
    found.discard(name)
    return found


def part_of(name: str) -> str | None:
    """Return the part of module ``name``: the part of its longest matching prefix."""
    short = name.removeprefix("jobqueue").removeprefix(".")
    best: tuple[int, str] | None = None
    for part, prefixes in PARTS.items():
        for prefix in prefixes:
            if short == prefix or (prefix and short.startswith(prefix + ".")):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), part)
    return None if best is None else best[1]


def crossings() -> list[str]:
    """Return every import that crosses a boundary of the table, as ``importer -> imported``."""
    bad = []
    for name, path in MODULES.items():
        mine = part_of(name)
        for target in sorted(imports_of(name, path)):
            theirs = part_of(target)
            if (name, target) in EXCEPTIONS:
                continue
            if mine is None or theirs not in ARROWS[mine]:
                bad.append(f"{name} ({mine}) -> {target} ({theirs})")
            for importer, imported in FORBIDDEN:
                mine_too = name == importer or name.startswith(importer + ".")
                inside = target == imported or target.startswith(imported + ".")
                if mine_too and inside and target not in VALUES:
                    bad.append(f"{name} -> {target} (forbidden: {FORBIDDEN[importer, imported]})")
            for private in PRIVATE:
                inside = target == private or target.startswith(private + ".")
                if inside and not (name == private or name.startswith(private + ".")):
                    bad.append(f"{name} -> {target} (only {private} imports {private})")
    return bad


def test_every_module_has_a_part() -> None:
    assert [name for name in MODULES if part_of(name) is None] == []


def test_every_prefix_names_a_module() -> None:
    prefixes = {f"jobqueue.{p}" if p else "jobqueue" for ps in PARTS.values() for p in ps}
    assert sorted(p for p in prefixes if p not in MODULES) == []


def test_imports_follow_the_arrows() -> None:
    assert crossings() == []


def test_exceptions_are_still_imports() -> None:
    """An exception the code no longer needs is dropped from the table."""
    for importer, imported in EXCEPTIONS:
        assert imported in imports_of(importer, MODULES[importer])


def test_leaves_import_only_leaves() -> None:
    """Spelled out, because the issue names them: no leaf reaches settings, store or above."""
    for name, path in MODULES.items():
        if part_of(name) == "leaves":
            assert {part_of(t) for t in imports_of(name, path)} <= {"leaves"}, name


def doc_table() -> dict[str, tuple[set[str], set[str]]]:
    """Return the page's arrows table: part -> (module prefixes, parts it may import)."""
    table = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.fullmatch(r"`[a-z]+`", cells[0]):
            continue
        part = cells[0].strip("`")
        prefixes = {m.rstrip("/").replace("/", ".") for m in re.findall(r"`([^`]*)`", cells[1])}
        prefixes = {"" if p == "jobqueue" else p.removesuffix(".py") for p in prefixes}
        table[part] = (prefixes, set(re.findall(r"`([a-z]+)`", cells[2])))
    return table


def test_the_page_mirrors_the_table() -> None:
    table = doc_table()
    assert set(table) == set(PARTS)
    for part, (prefixes, arrows) in table.items():
        assert prefixes == PARTS[part], part
        assert arrows == ARROWS[part], part


def named_paths() -> set[str]:
    return set(re.findall(r"\bjobqueue/[\w/.]*\w/?", DOC.read_text()))


def named_dotted() -> set[str]:
    return set(re.findall(r"\bjobqueue(?:\.[A-Za-z_]\w*)+", DOC.read_text()))


def test_the_page_names_paths_that_exist() -> None:
    names = named_paths()
    assert len(names) > 20
    assert sorted(n for n in names if not (ROOT / n).exists()) == []


def defines(module_path: str, name: str) -> bool:
    """Return whether the source of ``module_path`` binds ``name`` at module level."""
    tree = ast.parse(MODULES[module_path].read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.ImportFrom | ast.Import):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return False


def resolves(dotted: str) -> bool:
    """Return whether ``dotted`` is a module, or an attribute path under the longest one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_path = ".".join(parts[:cut])
        if module_path not in MODULES:
            continue
        try:
            value: object = importlib.import_module(module_path)
        except ModuleNotFoundError as missing:
            if not (missing.name or "").startswith("django.tasks"):
                raise
            # Django 5.2 has no django.tasks, so the backend's modules cannot be imported there:
            # read the names the module defines from its source instead.
            return len(parts) - cut <= 1 and (cut == len(parts) or defines(module_path, parts[cut]))
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False


def test_the_page_names_modules_and_functions_that_exist() -> None:
    names = named_dotted()
    assert len(names) > 20
    assert sorted(n for n in names if not resolves(n)) == []


@pytest.mark.parametrize("part", sorted(PARTS))
def test_every_part_is_on_the_page(part: str) -> None:
    assert f"`{part}`" in DOC.read_text()


def test_the_page_names_the_exceptions_and_the_forbidden_arrows() -> None:
    text = DOC.read_text()

    def named(dotted: str) -> bool:
        path = dotted.replace(".", "/")
        return any(form in text for form in (f"`{dotted}`", f"`{path}.py`", f"`{path}/`"))

    for importer, imported in [*EXCEPTIONS, *FORBIDDEN]:
        assert named(importer), importer
        assert named(imported), imported

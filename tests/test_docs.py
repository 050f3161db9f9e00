"""The documentation site builds with warnings as errors, and its local links and anchors resolve.

``docs/`` is a Sphinx site (MyST markdown, autodoc over the docstrings): a page missing from the
table of contents, a link to a page or heading that does not exist, a docstring autodoc cannot
read, all fail here. ``linkcheck`` checks local links and anchors only (``docs/conf.py`` ignores
``http(s)://``): CI has no internet. Needs the ``docs`` extra (in ``dev`` on Python 3.12+);
skipped without Sphinx, as in the older-Python stages of ``.ci/test``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def sphinx(builder: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            builder,
            "-d",
            str(out / "doctrees"),
            str(DOCS),
            str(out / builder),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


def test_the_docs_build_without_warnings_and_their_local_links_resolve(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    for builder in ("html", "linkcheck"):
        done = sphinx(builder, tmp_path)
        assert done.returncode == 0, f"sphinx -b {builder}:\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "html" / "comparison.html").exists()
    api = (tmp_path / "html" / "api.html").read_text()
    assert "jobqueue.enqueue" in api and "dedupe_key" in api  # autodoc read the docstrings


def test_the_docs_cite_nothing_a_reader_cannot_open():
    """No unpublished design notes, field-case numbers or tracker issues outside the history."""
    cited = re.compile(r"DESIGN\.md|FIELD-CASES|[Ff]ield cases? \d|\b[Ii]ssues? \d")
    for page in sorted(DOCS.glob("*.md")):
        if page.name == "decisions.md":  # a dated history; its preface says what these were
            assert "DESIGN.md" not in page.read_text() and "FIELD-CASES" not in page.read_text()
            continue
        found = [m.group(0) for m in cited.finditer(page.read_text())]
        assert not found, (page.name, found)
    deployment = (DOCS / "deployment.md").read_text()
    assert "once your version has it" not in deployment


def test_the_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) < 250
    assert (
        readme[2:6]
        == [
            "```bash",
            readme[3],
            readme[4],
            "```",
        ]
        and readme[3].startswith("bash .ci/demo")
        and readme[4].startswith("bash .ci/test")
    )
    text = "\n".join(readme)
    for page in re.findall(r"\]\((docs/[^)#]+)\)", text):
        assert (ROOT / page).exists(), page
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")

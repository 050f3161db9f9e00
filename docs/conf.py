"""Sphinx configuration of jobqueue's documentation site (MyST markdown, autodoc).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (the ``docs`` extra;
``tests/test_docs.py`` builds it so, warnings as errors, and checks its local links).
"""

import os
import sys
from pathlib import Path

import django
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# autodoc imports jobqueue's modules, and some import models: a minimal Django project of the
# docs' own (never the test settings a calling environment may name).
os.environ.pop("DJANGO_SETTINGS_MODULE", None)
if not settings.configured:
    settings.configure(
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "jobqueue",
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
        SECRET_KEY="docs",
        JOBQUEUE={"DISCOVER_MODULES": []},
    )
    django.setup()

import jobqueue  # noqa: E402

project = "jobqueue"
author = "the jobqueue authors"
copyright = "2026, the jobqueue authors"
release = jobqueue.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "furo"
html_title = f"jobqueue {release}"

# There is no internet where CI runs: `linkcheck` checks the local links and anchors only.
linkcheck_ignore = [r"https?://.*"]
linkcheck_anchors = True

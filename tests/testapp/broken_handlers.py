"""A handler module whose import fails: a bug, not an unknown job type."""

import a_module_that_does_not_exist  # noqa: F401

"""Index operations for the jobs table that do not block writes on PostgreSQL.

A plain ``CREATE INDEX`` holds a SHARE lock on the table until the build ends, and an enqueue
(INSERT) or an ack (UPDATE) waits behind it: on a table of millions of rows that is minutes of
blocked enqueues during a deploy. On PostgreSQL these operations build and drop indexes
``CONCURRENTLY`` (a SHARE UPDATE EXCLUSIVE lock, which writes do not wait for); elsewhere
(SQLite) they are the plain operations. A migration using them must set ``atomic = False``:
PostgreSQL refuses ``CONCURRENTLY`` inside a transaction.

The migration state they produce is exactly that of ``AddIndex`` and ``RemoveIndex``, so
``makemigrations --check`` sees no difference (docs/decisions.md, "Index builds CONCURRENTLY").

The loader skips this module (its name starts with ``_``): it holds no migration.
"""

from __future__ import annotations

from typing import Any

from django.db import NotSupportedError, migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ProjectState


def _on_postgresql(schema_editor: BaseDatabaseSchemaEditor) -> bool:
    """Return whether this editor writes to PostgreSQL, refusing a transaction there."""
    if schema_editor.connection.vendor != "postgresql":
        return False
    if schema_editor.connection.in_atomic_block:
        raise NotSupportedError(
            "CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction; the migration "
            "that uses this operation must set atomic = False"
        )
    return True


def _drop_invalid_leftover(schema_editor: BaseDatabaseSchemaEditor, name: str) -> None:
    """Drop an INVALID index called ``name``, the leftover of a failed concurrent build.

    A ``CREATE INDEX CONCURRENTLY`` that fails (a lock timeout, a cancelled deploy, a unique
    violation) leaves the index behind, marked INVALID: unused by queries but still maintained
    by every write, and in the way of the migration's next run ("relation already exists").
    A valid index of that name is left alone (the build then fails and says so).
    """
    if schema_editor.collect_sql:  # sqlmigrate: show the statements, query nothing
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(  # to_regclass: the name as the search path resolves it, or NULL
            "SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(%s) AND NOT indisvalid",
            [schema_editor.quote_name(name)],
        )
        invalid = cursor.fetchone() is not None
    if invalid:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")


def add_index(
    schema_editor: BaseDatabaseSchemaEditor, model: type[models.Model], index: models.Index
) -> None:
    """Build ``index`` on ``model``'s table, CONCURRENTLY on PostgreSQL.

    Args:
        schema_editor: the migration's schema editor (outside a transaction on PostgreSQL).
        model: the historical model the index belongs to.
        index: the index to build.

    Raises:
        NotSupportedError: on PostgreSQL inside a transaction (a migration without
            ``atomic = False``).
    """
    if _on_postgresql(schema_editor):
        _drop_invalid_leftover(schema_editor, index.name)
        schema_editor.add_index(model, index, concurrently=True)  # type: ignore[call-arg]
    else:
        schema_editor.add_index(model, index)


def remove_index(
    schema_editor: BaseDatabaseSchemaEditor, model: type[models.Model], index: models.Index
) -> None:
    """Drop ``index`` from ``model``'s table, CONCURRENTLY on PostgreSQL.

    Args:
        schema_editor: the migration's schema editor (outside a transaction on PostgreSQL).
        model: the historical model the index belongs to.
        index: the index to drop.

    Raises:
        NotSupportedError: on PostgreSQL inside a transaction.
    """
    if _on_postgresql(schema_editor):
        schema_editor.remove_index(model, index, concurrently=True)  # type: ignore[call-arg]
    else:
        schema_editor.remove_index(model, index)


class AddIndexWithoutBlockingWrites(migrations.AddIndex):
    """``AddIndex`` built CONCURRENTLY on PostgreSQL (a plain index elsewhere)."""

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        """Build the index."""
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            add_index(schema_editor, model, self.index)

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        """Drop the index."""
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            remove_index(schema_editor, model, self.index)


class ReplaceIndexWithoutBlockingWrites(migrations.AddIndex):
    """Replace the index called ``index.name`` with ``index``, never leaving the table without one.

    The state change is ``RemoveIndex(name)`` followed by ``AddIndex(index)`` (the autodetector's
    output for a changed index that keeps its name). On PostgreSQL the new index is built
    CONCURRENTLY under a temporary name while the old one still serves queries (the claim
    statement, for the claim index), then the old one is dropped CONCURRENTLY and the new one
    renamed (``ALTER INDEX ... RENAME`` takes a SHARE UPDATE EXCLUSIVE lock: writes do not wait).
    Elsewhere: drop, then create.
    """

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        """Remove the old index of that name from the state, then add the new one."""
        state.remove_index(app_label, self.model_name_lower, self.index.name)
        state.add_index(app_label, self.model_name_lower, self.index)

    def _swap(
        self,
        schema_editor: BaseDatabaseSchemaEditor,
        model: type[models.Model],
        old: models.Index,
        new: models.Index,
    ) -> None:
        if not _on_postgresql(schema_editor):
            schema_editor.remove_index(model, old)
            schema_editor.add_index(model, new)
            return
        staging = _staging_copy(new)
        # A staging index left by an interrupted run (valid or not) is ours to rebuild.
        remove_index(schema_editor, model, staging)
        add_index(schema_editor, model, staging)
        remove_index(schema_editor, model, old)
        schema_editor.rename_index(model, staging, new)

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        """Swap the old index (from ``from_state``) for the new one."""
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            old = _index_named(from_state, app_label, self.model_name_lower, self.index.name)
            self._swap(schema_editor, model, old, self.index)

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        """Swap the new index back for the old one (from ``to_state``, the earlier state)."""
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            old = _index_named(to_state, app_label, self.model_name_lower, self.index.name)
            self._swap(schema_editor, model, self.index, old)

    def describe(self) -> str:
        """Say what the operation does (``manage.py migrate --plan``)."""
        return f"Replace index {self.index.name} on {self.model_name} (concurrently)"

    @property
    def migration_name_fragment(self) -> str:
        """Name a migration made of this operation alone."""
        return f"replace_{self.model_name_lower}_{self.index.name.lower()}"


class AddFieldIfMissing(migrations.AddField):
    """``AddField`` that finds its column already there and leaves it (a non-atomic re-run).

    In a migration with ``atomic = False`` each operation commits on its own: when a later
    operation fails (a lock timeout during a concurrent build), this one's column stays while the
    migration is not recorded, and the plain ``AddField`` of the next run would fail with "column
    already exists". Only a column of the same name is looked for; its type is the operator's
    to trust (it was added by this operation's earlier run).
    """

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        """Add the column unless the table has it."""
        model = to_state.apps.get_model(app_label, self.model_name)
        if not schema_editor.collect_sql and self.allow_migrate_model(
            schema_editor.connection.alias, model
        ):
            column = model._meta.get_field(self.name).column
            connection = schema_editor.connection
            with connection.cursor() as cursor:
                table = connection.introspection.get_table_description(cursor, model._meta.db_table)
            if any(info.name == column for info in table):
                return
        super().database_forwards(app_label, schema_editor, from_state, to_state)


def _staging_copy(index: models.Index) -> models.Index:
    """Return ``index`` under the temporary name its concurrent replacement is built with."""
    copy = index.clone()
    copy.name = f"{index.name[:24]}_new"  # PostgreSQL names: 63 bytes; Django's limit: 30
    return copy


def _index_named(state: ProjectState, app_label: str, model_name: str, name: str) -> Any:
    """Return the index called ``name`` of a model in a migration state."""
    model_state = state.models[app_label, model_name]
    return model_state.get_index_by_name(name)

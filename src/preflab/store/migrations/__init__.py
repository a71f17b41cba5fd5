"""Alembic migrations of the feedback store, run programmatically by
:func:`preflab.store.migrate.upgrade` (no alembic.ini needed)."""

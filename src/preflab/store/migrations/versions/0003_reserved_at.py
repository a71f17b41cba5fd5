"""Schema version 3: ``queue_states.reserved_at``, when a study last showed a query to a person
(their hold on one of the pair's overlap places; renewed on every showing, cleared by a skip).
Holds before the upgrade start from the time the query was first shown.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    columns = (  # a store from before the studio's queues gets the table as it is now, on open
        {c["name"] for c in inspector.get_columns("queue_states")}
        if "queue_states" in inspector.get_table_names()
        else {"reserved_at"}
    )
    if "reserved_at" not in columns:
        op.add_column("queue_states", sa.Column("reserved_at", sa.Float, nullable=True))
        bind.execute(sa.text("UPDATE queue_states SET reserved_at = served_at"))
    bind.execute(sa.text("UPDATE preflab_info SET value = '3' WHERE key = 'schema_version'"))


def downgrade() -> None:
    raise NotImplementedError("PrefLab stores are never downgraded; export and re-import instead")

"""Schema version 4: ``queries.pair_key``, what makes two queries the same question (their two
sides in either order, :func:`preflab.store.queries.stored_pair_key`), filled in for every
stored query and indexed with (round, seq), so that a person's queue is picked in SQL; a round's
step counts widened to 64 bits (``rounds.env_steps``, ``rounds.total_steps``: a run counts
steps up to 2**53; SQLite's integers are 64-bit already, so only PostgreSQL changes them).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from preflab.store.queries import stored_pair_key

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

BATCH = 2000
WIDENED = ("env_steps", "total_steps")


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    tables = set(inspector.get_table_names())
    columns = {c["name"] for c in inspector.get_columns("queries")}
    if "pair_key" not in columns:
        op.add_column("queries", sa.Column("pair_key", sa.String(64), nullable=True))
    _fill_pair_keys(bind)
    if "ix_queries_pair_key" not in {ix["name"] for ix in inspector.get_indexes("queries")}:
        op.create_index("ix_queries_pair_key", "queries", ["pair_key", "round", "seq"])
    if bind.dialect.name != "sqlite" and "rounds" in tables:  # else made on open, as it is now
        for name in WIDENED:
            op.alter_column("rounds", name, type_=sa.BigInteger, existing_nullable=False)
    bind.execute(sa.text("UPDATE preflab_info SET value = '4' WHERE key = 'schema_version'"))


def _fill_pair_keys(bind: sa.Connection) -> None:
    """Write the pair key of every query without one, in batches of :data:`BATCH` (by seq)."""
    qs = sa.table(
        "queries",
        sa.column("id", sa.String),
        sa.column("a", sa.JSON),
        sa.column("b", sa.JSON),
        sa.column("seq", sa.Integer),
        sa.column("pair_key", sa.String),
    )
    after = None
    while True:
        q = sa.select(qs.c.id, qs.c.a, qs.c.b, qs.c.seq).where(qs.c.pair_key.is_(None))
        if after is not None:
            q = q.where(qs.c.seq > after)
        rows = bind.execute(q.order_by(qs.c.seq).limit(BATCH)).all()
        if not rows:
            return
        bind.execute(
            sa.update(qs).where(qs.c.id == sa.bindparam("qid")).values(pair_key=sa.bindparam("k")),
            [{"qid": i, "k": stored_pair_key(a, b)} for i, a, b, _seq in rows],
        )
        after = rows[-1][3]


def downgrade() -> None:
    raise NotImplementedError("PrefLab stores are never downgraded; export and re-import instead")

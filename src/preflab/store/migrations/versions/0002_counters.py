"""Schema version 2: sequence numbers from a counter row updated atomically (never max + 1),
unique seq indexes, an index on token hashes.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SEQ_TABLES = ("segments", "queries", "judgements", "ratings")


def upgrade() -> None:
    bind = op.get_bind()
    tables = set(sa.inspect(bind).get_table_names())
    if "counters" not in tables:
        op.create_table(
            "counters",
            sa.Column("name", sa.String(64), primary_key=True),
            sa.Column("value", sa.BigInteger, nullable=False),
        )
    for t in ("segments", "queries"):  # max + 1 may have handed out a seq twice: renumber
        dup = bind.execute(
            sa.text(f"SELECT seq FROM {t} GROUP BY seq HAVING COUNT(*) > 1 LIMIT 1")
        ).first()
        if dup is not None:
            ids = bind.execute(sa.text(f"SELECT id FROM {t} ORDER BY seq, id")).scalars().all()
            bind.execute(sa.text(f"UPDATE {t} SET seq = -seq"))
            bind.execute(
                sa.text(f"UPDATE {t} SET seq = :s WHERE id = :i"),
                [{"s": k + 1, "i": i} for k, i in enumerate(ids)],
            )
        op.create_index(f"ux_{t}_seq", t, ["seq"], unique=True)
    op.create_index("ix_annotators_token", "annotators", ["token_hash"])
    for t in SEQ_TABLES:
        top = bind.execute(sa.text(f"SELECT COALESCE(MAX(seq), 0) FROM {t}")).scalar_one()
        bind.execute(
            sa.text("INSERT INTO counters (name, value) VALUES (:n, :v)"),
            {"n": t, "v": int(top)},
        )
    bind.execute(sa.text("UPDATE preflab_info SET value = '2' WHERE key = 'schema_version'"))


def downgrade() -> None:
    raise NotImplementedError("PrefLab stores are never downgraded; export and re-import instead")

"""Schema version 1: the store as PrefLab 0.1 created it (create_all, max + 1 sequences).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing to do: a version-1 store already holds these tables (it is stamped 0001)."""


def downgrade() -> None:
    raise NotImplementedError("PrefLab stores are never downgraded; export and re-import instead")

"""when each link process last read its broker: a link that starts again credits the rate
of the backlog that waited there with that time (devices/link/absence.py)

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "link_heartbeats",
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("reading_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("shard", name=op.f("pk_link_heartbeats")),
    )


def downgrade() -> None:
    op.drop_table("link_heartbeats")

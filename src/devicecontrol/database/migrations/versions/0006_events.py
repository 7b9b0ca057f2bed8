"""the live events' log and the open streams (contract §11)

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", RowId, nullable=False),
        sa.Column("controller_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("ix_events_controller_id_id", "events", ["controller_id", "id"])
    op.create_index("ix_events_user_id_id", "events", ["user_id", "id"])
    op.create_index("ix_events_created_at", "events", ["created_at"])
    op.create_table(
        "event_streams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_event_streams_user_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_streams")),
    )
    op.create_index("ix_event_streams_user_id", "event_streams", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_event_streams_user_id", table_name="event_streams")
    op.drop_table("event_streams")
    op.drop_index("ix_events_created_at", table_name="events")
    op.drop_index("ix_events_user_id_id", table_name="events")
    op.drop_index("ix_events_controller_id_id", table_name="events")
    op.drop_table("events")

"""when each device secret last changed: the link checks only the secrets rotated lately

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("controllers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("device_secret_changed_at", sa.DateTime(), nullable=True))
        batch_op.create_index(
            "ix_controllers_device_secret_changed_at", ["device_secret_changed_at"]
        )


def downgrade() -> None:
    with op.batch_alter_table("controllers", schema=None) as batch_op:
        batch_op.drop_index("ix_controllers_device_secret_changed_at")
        batch_op.drop_column("device_secret_changed_at")

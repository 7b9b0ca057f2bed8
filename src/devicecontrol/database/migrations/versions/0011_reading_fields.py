"""the field names each controller has been let report: a device may invent at most so many
(devices/link/field_budget.py), so that no device can make the exports, summaries and pages
of its readings cost without bound

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reading_fields",
        sa.Column("controller_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["controller_id"],
            ["controllers.id"],
            name=op.f("fk_reading_fields_controller_id_controllers"),
        ),
        sa.PrimaryKeyConstraint("controller_id", "name", name=op.f("pk_reading_fields")),
    )


def downgrade() -> None:
    op.drop_table("reading_fields")

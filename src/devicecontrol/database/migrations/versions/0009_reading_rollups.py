"""readings rolled up by quarter hour: what the summary of a month reads instead of 43,200
readings (docs/DESIGN.md, "Readings summary")

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reading_rollups",
        sa.Column("controller_id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("period_start", sa.DateTime(), nullable=False),
        sa.Column("field", sa.Text(), nullable=False),
        sa.Column("readings", sa.Integer(), nullable=False),
        sa.Column("minimum", sa.Float(), nullable=True),
        sa.Column("maximum", sa.Float(), nullable=True),
        sa.Column("total", sa.Float(), nullable=True),
        sa.Column("energy_wh", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["controller_id"],
            ["controllers.id"],
            name=op.f("fk_reading_rollups_controller_id_controllers"),
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["controller_assignments.id"],
            name=op.f("fk_reading_rollups_assignment_id_controller_assignments"),
        ),
        sa.PrimaryKeyConstraint(
            "controller_id",
            "assignment_id",
            "period_start",
            "field",
            name=op.f("pk_reading_rollups"),
        ),
    )
    op.create_index("ix_reading_rollups_period_start", "reading_rollups", ["period_start"])
    op.create_table(
        "reading_rollup_progress",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rolled_until", sa.DateTime(), nullable=False),
        sa.Column("next_controller", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reading_rollup_progress")),
    )


def downgrade() -> None:
    op.drop_table("reading_rollup_progress")
    op.drop_index("ix_reading_rollups_period_start", table_name="reading_rollups")
    op.drop_table("reading_rollups")

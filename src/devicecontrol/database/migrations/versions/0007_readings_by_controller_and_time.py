"""readings by controller, ownership and time: the summary and the CSV export read one
ownership's readings within a time range, and count them from the index alone (the plans
are in docs/DESIGN.md, "Readings summary")

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain CREATE INDEX (no batch): the readings table is the largest, never copied
    op.create_index(
        "ix_readings_controller_id_assignment_id_created_at",
        "readings",
        ["controller_id", "assignment_id", "created_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_readings_controller_id_assignment_id_created_at", table_name="readings")

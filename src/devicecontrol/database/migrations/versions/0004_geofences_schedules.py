"""geofences and schedules (contract §12)

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _owned_by(table: str) -> list[sa.schema.SchemaItem]:
    """id, controller_id and user_id with their keys: both tables begin so."""
    return [
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("controller_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["controller_id"],
            ["controllers.id"],
            name=op.f(f"fk_{table}_controller_id_controllers"),
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f(f"fk_{table}_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}")),
    ]


def upgrade() -> None:
    op.create_table(
        "geofences",
        *_owned_by("geofences"),
        sa.Column("latitude", sa.Float(), nullable=False),
        sa.Column("longitude", sa.Float(), nullable=False),
        sa.Column("radius", sa.Integer(), nullable=False),
        sa.Column("enter_command_name", sa.String(length=64), nullable=False),
        sa.Column("enter_command_fields", sa.Text(), nullable=False),
        sa.Column("exit_command_name", sa.String(length=64), nullable=False),
        sa.Column("exit_command_fields", sa.Text(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("enter_push", sa.Boolean(), nullable=False),
        sa.Column("exit_push", sa.Boolean(), nullable=False),
        sa.Column("inside", sa.Boolean(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    with op.batch_alter_table("geofences", schema=None) as batch_op:
        batch_op.create_index("ix_geofences_controller_id", ["controller_id"])
        batch_op.create_index("ix_geofences_user_id_id", ["user_id", "id"])

    op.create_table(
        "schedules",
        *_owned_by("schedules"),
        sa.Column("days", sa.String(length=7), nullable=False),
        sa.Column("from_time", sa.String(length=5), nullable=False),
        sa.Column("to_time", sa.String(length=5), nullable=True),
        sa.Column("command_name", sa.String(length=64), nullable=False),
        sa.Column("command_fields", sa.Text(), nullable=False),
        sa.Column("end_command_name", sa.String(length=64), nullable=True),
        sa.Column("end_command_fields", sa.Text(), nullable=True),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("next_fire_at", sa.DateTime(), nullable=True),
        sa.Column("next_kind", sa.String(length=8), nullable=True),
        sa.Column("last_fired_at", sa.DateTime(), nullable=True),
        sa.Column("last_command_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.create_index("ix_schedules_controller_id", ["controller_id"])
        batch_op.create_index("ix_schedules_user_id_id", ["user_id", "id"])
        batch_op.create_index("ix_schedules_next_fire_at", ["next_fire_at"])


def downgrade() -> None:
    for table, indexes in (
        ("schedules", ("ix_schedules_next_fire_at", "ix_schedules_user_id_id")),
        ("geofences", ("ix_geofences_user_id_id",)),
    ):
        with op.batch_alter_table(table, schema=None) as batch_op:
            for index in (*indexes, f"ix_{table}_controller_id"):
                batch_op.drop_index(index)
        op.drop_table(table)

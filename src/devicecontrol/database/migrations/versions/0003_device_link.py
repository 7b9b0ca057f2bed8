"""the device link: device secrets, last seen, readings, latest readings, commands

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
UNFINISHED_ONLY = sa.text("status IN ('queued', 'sent')")


def upgrade() -> None:
    with op.batch_alter_table("controllers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("device_secret_digest", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("last_seen", sa.DateTime(), nullable=True))

    op.create_table(
        "readings",
        sa.Column("id", ROW_ID, nullable=False),
        sa.Column("controller_id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["controller_assignments.id"],
            name=op.f("fk_readings_assignment_id_controller_assignments"),
        ),
        sa.ForeignKeyConstraint(
            ["controller_id"],
            ["controllers.id"],
            name=op.f("fk_readings_controller_id_controllers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_readings")),
    )
    with op.batch_alter_table("readings", schema=None) as batch_op:
        batch_op.create_index("ix_readings_controller_id_id", ["controller_id", "id"])
        batch_op.create_index("ix_readings_created_at", ["created_at"])

    op.create_table(
        "latest_readings",
        sa.Column("controller_id", sa.Integer(), nullable=False),
        sa.Column("reading_id", ROW_ID, nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["controller_assignments.id"],
            name=op.f("fk_latest_readings_assignment_id_controller_assignments"),
        ),
        sa.ForeignKeyConstraint(
            ["controller_id"],
            ["controllers.id"],
            name=op.f("fk_latest_readings_controller_id_controllers"),
        ),
        sa.PrimaryKeyConstraint("controller_id", name=op.f("pk_latest_readings")),
    )

    op.create_table(
        "commands",
        sa.Column("id", ROW_ID, nullable=False),
        sa.Column("public_id", sa.String(length=32), nullable=False),
        sa.Column("controller_id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("sent_at", sa.DateTime(), nullable=True),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["controller_assignments.id"],
            name=op.f("fk_commands_assignment_id_controller_assignments"),
        ),
        sa.ForeignKeyConstraint(
            ["controller_id"],
            ["controllers.id"],
            name=op.f("fk_commands_controller_id_controllers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_commands")),
        sa.UniqueConstraint("public_id", name=op.f("uq_commands_public_id")),
    )
    with op.batch_alter_table("commands", schema=None) as batch_op:
        batch_op.create_index("ix_commands_controller_id_id", ["controller_id", "id"])
        batch_op.create_index(
            "ix_commands_unfinished",
            ["controller_id", "id"],
            sqlite_where=UNFINISHED_ONLY,
            postgresql_where=UNFINISHED_ONLY,
        )


def downgrade() -> None:
    with op.batch_alter_table("commands", schema=None) as batch_op:
        batch_op.drop_index("ix_commands_unfinished")
        batch_op.drop_index("ix_commands_controller_id_id")
    op.drop_table("commands")
    op.drop_table("latest_readings")
    with op.batch_alter_table("readings", schema=None) as batch_op:
        batch_op.drop_index("ix_readings_created_at")
        batch_op.drop_index("ix_readings_controller_id_id")
    op.drop_table("readings")
    with op.batch_alter_table("controllers", schema=None) as batch_op:
        batch_op.drop_column("last_seen")
        batch_op.drop_column("device_secret_digest")

"""The schema, as SQLAlchemy Core tables; Alembic migrations are written against it.

Times are naive UTC ``DateTime`` columns on both engines. Secrets (tokens, client secrets,
claim codes) are stored only as SHA-256 hex digests, passwords only as argon2id hashes.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

DIGEST_LENGTH = 64  # SHA-256 in hex
ACTIVE_ONLY = text("deleted_at IS NULL")

countries = Table(
    "countries",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("geoname_id", Integer, nullable=False, unique=True),
    Column("continent_code", String(2), nullable=False),
    Column("continent_name", String(32), nullable=False),
    Column("country_code", String(2), nullable=False),
    Column("country_name", String(100), nullable=False),
    Column("city_name", String(200), nullable=False),
    Column("time_zone", String(64), nullable=False),
)

users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("username", String(254), nullable=False),
    # lower-cased username: the case-insensitive identity, unique across accounts
    Column("username_key", String(254), nullable=False, unique=True),
    Column("password_hash", String(255), nullable=False),
    Column("firstname", String(100), nullable=False, server_default=""),
    Column("lastname", String(100), nullable=False, server_default=""),
    Column("phone", String(32), nullable=True),
    Column("country_id", ForeignKey("countries.id"), nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("disabled_at", DateTime, nullable=True),
)

clients = Table(
    "clients",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("client_id", String(100), nullable=False, unique=True),
    Column("secret_digest", String(DIGEST_LENGTH), nullable=False),
    Column("created_at", DateTime, nullable=False),
)

refresh_tokens = Table(
    "refresh_tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("digest", String(DIGEST_LENGTH), nullable=False, unique=True),
    Column("user_id", ForeignKey("users.id"), nullable=False, index=True),
    Column("client_pk", ForeignKey("clients.id"), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("expires_at", DateTime, nullable=False),
    Column("revoked_at", DateTime, nullable=True),
)

access_tokens = Table(
    "access_tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("digest", String(DIGEST_LENGTH), nullable=False, unique=True),
    Column("user_id", ForeignKey("users.id"), nullable=False, index=True),
    Column("client_pk", ForeignKey("clients.id"), nullable=False),
    Column("refresh_token_id", ForeignKey("refresh_tokens.id"), nullable=True, index=True),
    Column("created_at", DateTime, nullable=False),
    Column("expires_at", DateTime, nullable=False),
    Column("revoked_at", DateTime, nullable=True),
)

# the web app's sessions (webapp/): a browser's cookie, kept only as its digest; a row is
# deleted when its session ends (log-out, password change, revoke, disable)
web_sessions = Table(
    "web_sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("digest", String(DIGEST_LENGTH), nullable=False, unique=True),
    Column("user_id", ForeignKey("users.id"), nullable=False, index=True),
    Column("created_at", DateTime, nullable=False),
    Column("expires_at", DateTime, nullable=False),
)

controllers = Table(
    "controllers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("serial_number", String(64), nullable=False, unique=True),
    Column("mac", String(16), nullable=False),
    Column("type", String(64), nullable=False),
    Column("name", String(200), nullable=False, server_default=""),
    Column("firmware_version", String(64), nullable=False, server_default=""),
    Column("brand_id", Integer, nullable=False, server_default="1"),
    Column("device_group", String(64), nullable=False, server_default=""),
    Column("room_id", Integer, nullable=True),
    Column("online", Boolean, nullable=False, server_default=text("false")),
    Column("claim_code_digest", String(DIGEST_LENGTH), nullable=True),
    Column("user_id", ForeignKey("users.id"), nullable=True),
    Column("created_at", DateTime, nullable=False),
    # the device link (contract §9): the device's MQTT password, only as a digest (null: the
    # device cannot connect until an operator gives it one), and when it was last heard from
    Column("device_secret_digest", String(DIGEST_LENGTH), nullable=True),
    Column("last_seen", DateTime, nullable=True),
    # when rotate-secret last changed the secret: the link reads the lately rotated ones
    # every second, not every connected device's
    Column("device_secret_changed_at", DateTime, nullable=True),
    # the owner's list is read in registration order: (user_id, id) serves it from the index
    Index("ix_controllers_user_id_id", "user_id", "id"),
    Index("ix_controllers_device_secret_changed_at", "device_secret_changed_at"),
)

controller_assignments = Table(
    "controller_assignments",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("controller_id", ForeignKey("controllers.id"), nullable=False, index=True),
    Column("user_id", ForeignKey("users.id"), nullable=False, index=True),
    Column("serial_number", String(64), nullable=False),
    Column("mac", String(16), nullable=False),
    Column("firmware_version", String(64), nullable=False),
    Column("name", String(200), nullable=False),
    Column("type", String(64), nullable=False),
    Column("device_group", String(64), nullable=False),
    Column("status_push", Integer, nullable=False, server_default="0"),
    Column("room_id", Integer, nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("assigned_at", DateTime, nullable=False),
    Column("deleted_at", DateTime, nullable=True),
    # at most one active record per controller, enforced by the database itself
    Index(
        "uq_controller_assignments_active",
        "controller_id",
        unique=True,
        sqlite_where=ACTIVE_ONLY,
        postgresql_where=ACTIVE_ONLY,
    ),
)

throttle_failures = Table(
    "throttle_failures",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("scope", String(32), nullable=False),
    # SHA-256 of the throttled subject (username, address, serial, user id): fixed size
    Column("subject_digest", String(DIGEST_LENGTH), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Index("ix_throttle_failures_scope_subject", "scope", "subject_digest", "created_at"),
)

# a big fleet reports many readings: 64-bit ids on PostgreSQL (SQLite's rowid is 64-bit)
RowId = BigInteger().with_variant(Integer, "sqlite")
UNFINISHED_ONLY = text("status IN ('queued', 'sent')")

readings = Table(
    "readings",
    metadata,
    Column("id", RowId, primary_key=True),
    Column("controller_id", ForeignKey("controllers.id"), nullable=False),
    # the ownership in force when the reading arrived (null: nobody owned the device then)
    Column("assignment_id", ForeignKey("controller_assignments.id"), nullable=True),
    Column("payload", Text, nullable=False),  # the JSON object as received, at most 4 KiB
    Column("created_at", DateTime, nullable=False),
    # newest first per controller, and the retention purge by age
    Index("ix_readings_controller_id_id", "controller_id", "id"),
    # one ownership's readings within a time range: the summary and the CSV export
    Index(
        "ix_readings_controller_id_assignment_id_created_at",
        "controller_id",
        "assignment_id",
        "created_at",
    ),
    Index("ix_readings_created_at", "created_at"),
)

# a quarter hour of one ownership's readings: per numeric field, how many, min, max and
# total; the row whose field is "" holds the readings counted and the energy (a plug's
# power integrated). The readings summary reads these instead of the readings themselves
reading_rollups = Table(
    "reading_rollups",
    metadata,
    Column("controller_id", ForeignKey("controllers.id"), primary_key=True),
    Column("assignment_id", ForeignKey("controller_assignments.id"), primary_key=True),
    Column("period_start", DateTime, primary_key=True),
    Column("field", Text, primary_key=True),
    Column("readings", Integer, nullable=False),
    Column("minimum", Float, nullable=True),
    Column("maximum", Float, nullable=True),
    Column("total", Float, nullable=True),
    Column("energy_wh", Float, nullable=True),
    Index("ix_reading_rollups_period_start", "period_start"),  # the purge, by age
)

# how far the rollups have come (one row): every quarter hour before ``rolled_until`` is
# rolled up, and that one for the controllers whose id is below ``next_controller``
reading_rollup_progress = Table(
    "reading_rollup_progress",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("rolled_until", DateTime, nullable=False),
    Column("next_controller", Integer, nullable=False),  # within that quarter hour
)

# the newest reading of each controller, kept apart so that reads need no scan of history
latest_readings = Table(
    "latest_readings",
    metadata,
    Column("controller_id", ForeignKey("controllers.id"), primary_key=True),
    Column("reading_id", RowId, nullable=False),
    Column("assignment_id", ForeignKey("controller_assignments.id"), nullable=True),
    Column("payload", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
)

commands = Table(
    "commands",
    metadata,
    Column("id", RowId, primary_key=True),  # creation order, for delivery in order
    Column("public_id", String(32), nullable=False, unique=True),  # the API's `id`
    Column("controller_id", ForeignKey("controllers.id"), nullable=False),
    # the ownership the command was made under: a hand-over cancels it, and hides it
    Column("assignment_id", ForeignKey("controller_assignments.id"), nullable=True),
    Column("name", String(64), nullable=False),
    Column("params", Text, nullable=False),  # JSON object
    Column("status", String(16), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("sent_at", DateTime, nullable=True),
    Column("completed_at", DateTime, nullable=True),
    Column("expires_at", DateTime, nullable=False),
    Column("result", Text, nullable=True),  # JSON object reported by the device
    Column("error", String(500), nullable=True),
    Index("ix_commands_controller_id_id", "controller_id", "id"),
    # what is still to deliver or to expire: small, whatever the history's size
    Index(
        "ix_commands_unfinished",
        "controller_id",
        "id",
        sqlite_where=UNFINISHED_ONLY,
        postgresql_where=UNFINISHED_ONLY,
    ),
)

# the original API's automation (contract §12): a user's geofences and weekly schedules of
# one of their controllers; a hand-over or release deletes them (controllers/service.py)
geofences = Table(
    "geofences",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("controller_id", ForeignKey("controllers.id"), nullable=False, index=True),
    Column("user_id", ForeignKey("users.id"), nullable=False),
    Column("latitude", Float, nullable=False),
    Column("longitude", Float, nullable=False),
    Column("radius", Integer, nullable=False),  # metres
    Column("enter_command_name", String(64), nullable=False),
    Column("enter_command_fields", Text, nullable=False),  # JSON object
    Column("exit_command_name", String(64), nullable=False),
    Column("exit_command_fields", Text, nullable=False),
    Column("active", Boolean, nullable=False),
    Column("enter_push", Boolean, nullable=False),
    Column("exit_push", Boolean, nullable=False),
    # where the phone last was (null: not reported yet), kept for the hysteresis
    Column("inside", Boolean, nullable=True),
    Column("created_at", DateTime, nullable=False),
    Index("ix_geofences_user_id_id", "user_id", "id"),
)

schedules = Table(
    "schedules",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("controller_id", ForeignKey("controllers.id"), nullable=False, index=True),
    Column("user_id", ForeignKey("users.id"), nullable=False),
    Column("days", String(7), nullable=False),  # Monday first, "1" = on
    Column("from_time", String(5), nullable=False),  # HH:MM, local
    Column("to_time", String(5), nullable=True),
    Column("command_name", String(64), nullable=False),
    Column("command_fields", Text, nullable=False),  # JSON object
    Column("end_command_name", String(64), nullable=True),
    Column("end_command_fields", Text, nullable=True),
    Column("time_zone", String(64), nullable=False),  # IANA
    Column("active", Boolean, nullable=False),
    # the next firing, claimed by a conditional UPDATE of these two (schedules/runner.py):
    # its UTC instant (null: nothing to fire) and which command it makes ("start", "end")
    Column("next_fire_at", DateTime, nullable=True),
    Column("next_kind", String(8), nullable=True),
    Column("last_fired_at", DateTime, nullable=True),
    Column("last_command_id", String(32), nullable=True),  # the command's public id
    Column("created_at", DateTime, nullable=False),
    Index("ix_schedules_user_id_id", "user_id", "id"),
    Index("ix_schedules_next_fire_at", "next_fire_at"),
)

# what the live streams send (contract §11), in commit order: ``id`` is an event's position,
# the SSE ``id`` and what ``Last-Event-ID`` names. Kept for EVENT_RETENTION (events/log.py)
events = Table(
    "events",
    metadata,
    Column("id", RowId, primary_key=True),
    Column("controller_id", Integer, nullable=False),
    # online, reading, command; gained and lost (an owner change, as seen by ``user_id``)
    Column("kind", String(16), nullable=False),
    Column("user_id", Integer, nullable=True),
    Column("data", Text, nullable=False),  # the JSON of the event's data line
    Column("created_at", DateTime, nullable=False),
    # a resumed stream's catch-up: its controllers' events, and its user's owner changes
    Index("ix_events_controller_id_id", "controller_id", "id"),
    Index("ix_events_user_id_id", "user_id", "id"),
    Index("ix_events_created_at", "created_at"),
)

# the open streams, across every process: at most STREAMS_PER_USER each; a row whose
# process died is stale once ``seen_at`` is older than events/slots.py's STALE_AFTER
event_streams = Table(
    "event_streams",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", ForeignKey("users.id"), nullable=False),
    Column("seen_at", DateTime, nullable=False),
    Index("ix_event_streams_user_id", "user_id"),
)

# the field names each controller has been let report (devices/link/field_budget.py): at
# most MAX_FIELDS besides its type's own, whatever the device invents
reading_fields = Table(
    "reading_fields",
    metadata,
    Column("controller_id", ForeignKey("controllers.id"), primary_key=True),
    Column("name", Text, primary_key=True),
)

# when each link process last read its broker (devices/link/absence.py): a link that starts
# again knows how long its devices' messages waited there, and credits their rate for it
link_heartbeats = Table(
    "link_heartbeats",
    metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),  # DEVICECONTROL_LINK_SHARD's I
    Column("reading_at", DateTime, nullable=False),
)

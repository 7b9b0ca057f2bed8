"""The operators' command line: thin commands over the same services the HTTP API uses."""

from __future__ import annotations

from devicecontrol.cli.backup import backup
from devicecontrol.cli.clients import clients
from devicecontrol.cli.controllers import controllers
from devicecontrol.cli.core import main
from devicecontrol.cli.database import db
from devicecontrol.cli.demo import demo
from devicecontrol.cli.devices import devices
from devicecontrol.cli.geofences import geofences
from devicecontrol.cli.schedules import schedules
from devicecontrol.cli.serve import serve
from devicecontrol.cli.tokens import tokens
from devicecontrol.cli.users import users

for command in (
    serve,
    db,
    clients,
    users,
    controllers,
    devices,
    geofences,
    schedules,
    tokens,
    demo,
):
    main.add_command(command)
db.add_command(backup)

__all__ = ["main"]

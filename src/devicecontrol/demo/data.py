"""Demo data for a first look: a client, two users, a few controllers and three days of
their readings, on an empty database."""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta
from typing import Any

import msgspec

from devicecontrol.auth.clients import create_client
from devicecontrol.clock import utcnow
from devicecontrol.controllers.provisioning import ControllerSpec, add_controller
from devicecontrol.demo import repository as demo_repository
from devicecontrol.devices import repository as devices_repository
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings.repository import ArrivedReading
from devicecontrol.runtime import Runtime
from devicecontrol.users.service import create_user

DEMO_CLIENT_ID = "demo-app"
DEMO_CLIENT_SECRET = "demo-client-secret"
DEMO_USER = "demo@example.com"
DEMO_PASSWORD = "demo-password"
FRIEND_USER = "friend@example.com"
FRIEND_PASSWORD = "friend-password"

# the demo devices log in with these; `devices simulate --demo` and `serve --demo` play all
# but DEMO-PLUG-3, which is left for a person to play with the Mosquitto clients
DEMO_DEVICE_SECRETS = {
    "DEMO-MELISSA-1": "demo-melissa-1-device-secret",
    "DEMO-PLUG-1": "demo-plug-1-device-secret",
    "DEMO-PLUG-2": "demo-plug-2-device-secret",
    "DEMO-BOBBIE-1": "demo-bobbie-1-device-secret",
    "DEMO-PLUG-3": "demo-plug-3-device-secret",
}
HAND_PLAYED = "DEMO-PLUG-3"
HISTORY_DAYS = 3  # of readings, one a minute, for the demo user's simulated controllers

DEMO_CONTROLLERS = (
    ControllerSpec("DEMO-MELISSA-1", "A0B1C2D3E4F5", "melissa", name="Living room",
                   firmware_version="1.4.2", device_group="climate", room_id=1,
                   owner=DEMO_USER, device_secret=DEMO_DEVICE_SECRETS["DEMO-MELISSA-1"]),
    ControllerSpec("DEMO-PLUG-1", "A0B1C2D3E4F6", "smart_plug", name="Desk lamp",
                   firmware_version="2.0.1", device_group="plugs", owner=DEMO_USER,
                   device_secret=DEMO_DEVICE_SECRETS["DEMO-PLUG-1"]),
    ControllerSpec("DEMO-PLUG-2", "A0B1C2D3E4F7", "smart_plug", name="Kettle",
                   firmware_version="2.0.1", device_group="plugs",
                   device_secret=DEMO_DEVICE_SECRETS["DEMO-PLUG-2"]),
    ControllerSpec("DEMO-BOBBIE-1", "A0B1C2D3E4F8", "bobbie", name="Bedroom",
                   firmware_version="0.9.7", device_group="climate", claim_code="7F3K-92QD",
                   device_secret=DEMO_DEVICE_SECRETS["DEMO-BOBBIE-1"]),
    ControllerSpec("DEMO-PLUG-3", "A0B1C2D3E4F9", "smart_plug", name="Played by hand",
                   firmware_version="2.0.1", device_group="plugs", owner=DEMO_USER,
                   device_secret=DEMO_DEVICE_SECRETS["DEMO-PLUG-3"]),
)  # fmt: skip
# what the simulator plays for the demo
SIMULATED = tuple(spec for spec in DEMO_CONTROLLERS if spec.serial_number != HAND_PLAYED)


async def database_is_empty(runtime: Runtime) -> bool:
    async with runtime.database.read() as connection:
        return not await demo_repository.holds_any_record(connection)


async def fill_demo(runtime: Runtime) -> None:
    """Create the demo records; the caller has checked that the database is empty."""
    await create_client(runtime, DEMO_CLIENT_ID, secret=DEMO_CLIENT_SECRET)
    await create_user(
        runtime, DEMO_USER, password=DEMO_PASSWORD, firstname="Ana", lastname="Petrova",
        phone="+359 2 123 4567", country="BG", city="Sofia",
    )  # fmt: skip
    await create_user(
        runtime, FRIEND_USER, password=FRIEND_PASSWORD, firstname="Ben", lastname="Okafor",
        country="NL", city="Amsterdam",
    )  # fmt: skip
    for spec in DEMO_CONTROLLERS:
        await add_controller(runtime, spec)
    await add_history(runtime, utcnow())


async def add_history(runtime: Runtime, now: datetime) -> None:
    """HISTORY_DAYS of one reading a minute for the demo user's simulated controllers, so
    that their charts and summaries have something to show from the first minute."""
    for spec in SIMULATED:
        if spec.owner != DEMO_USER:
            continue
        async with runtime.database.read() as connection:
            device = await devices_repository.find_device(connection, spec.serial_number)
        assert device is not None  # added just before
        minutes = HISTORY_DAYS * 24 * 60
        arrived = [
            ArrivedReading(
                device.id,
                msgspec.json.encode(past_reading(spec.type, minute)).decode(),
                now - timedelta(minutes=minutes - minute),
            )
            for minute in range(minutes)
        ]
        async with runtime.database.write() as connection:
            await readings_repository.insert_readings(connection, arrived)


def past_reading(device_type: str, minute: int) -> dict[str, Any]:
    """A reading of the past: a room that is warmer by day, a lamp on in the evenings."""
    rng = random.Random(minute)
    hour = minute / 60 % 24
    if device_type == "smart_plug":
        on = 17 <= hour < 23
        watts = round(rng.uniform(9, 12), 1) if on else 0.0
        return {"relay_state": "on" if on else "off", "power": [watts]}
    temp = round(21 + 1.5 * math.sin((hour - 9) / 24 * 2 * math.pi) + rng.uniform(-0.2, 0.2), 1)
    humidity = round(42 + 4 * math.cos(hour / 24 * 2 * math.pi) + rng.uniform(-1, 1), 1)
    return {
        "temp": temp,
        "humidity": humidity,
        "raw_temperature": int(temp * 1000),
        "raw_humidity": int(humidity * 1000),
    }


def walkthrough_script(base_url: str = "http://127.0.0.1:8000") -> str:
    """The curl walk-through; the README shows exactly this text. Tokens stay in variables."""
    auth_field = 'python3 -c \'import json, sys; print(json.load(sys.stdin)["auth"]["{}"])\''
    return f"""\
B=${{B:-{base_url}}}
LOGIN=$(curl -s $B/v1/auth/login -d client_id={DEMO_CLIENT_ID} -d client_secret={DEMO_CLIENT_SECRET} \\
     -d username={DEMO_USER} -d password={DEMO_PASSWORD}); echo "$LOGIN"
TOKEN=$(echo "$LOGIN" | {auth_field.format("access_token")})
REFRESH=$(echo "$LOGIN" | {auth_field.format("refresh_token")})
curl -s $B/v1/auth/renew -H 'Content-Type: application/json' \\
     -d '{{"client_id": "{DEMO_CLIENT_ID}", "client_secret": "{DEMO_CLIENT_SECRET}", "refresh_token": "'$REFRESH'"}}'; echo
curl -s $B/v1/users/me -H "Authorization: Bearer $TOKEN"; echo
curl -s $B/v1/users/me -H "Authorization: Bearer $TOKEN" -H 'Accept-Response: Advanced'; echo
curl -s "$B/v1/controllers?type=smart_plug" -H "Authorization: Bearer $TOKEN"; echo
curl -s $B/v1/controllers/DEMO-MELISSA-1 -H "Authorization: Bearer $TOKEN"; echo
curl -s -X POST $B/v1/controllers/DEMO-PLUG-2/assign -H "Authorization: Bearer $TOKEN"; echo
curl -s -X POST $B/v1/controllers/DEMO-BOBBIE-1/assign -H "Authorization: Bearer $TOKEN" \\
     -H 'Content-Type: application/json' -d '{{"claim_code": "7F3K-92QD"}}'; echo
curl -s -X PATCH $B/v1/controllers/DEMO-PLUG-2/reassign -H "Authorization: Bearer $TOKEN" \\
     -H 'Content-Type: application/json' -d '{{"owner": "{FRIEND_USER}"}}'; echo
curl -s $B/v1/provider/fetch -H "Authorization: Bearer $TOKEN" \\
     -H 'Content-Type: application/json' -d '{{"serial_number": "DEMO-MELISSA-1"}}'; echo
curl -s $B/v1/provider/send -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \\
     -d '{{"serial_number": "DEMO-MELISSA-1", "command": "send_ir_code", "state": 1, "mode": 3, "temp": 22, "fan": 2}}'; echo
curl -s "$B/v1/controllers/DEMO-PLUG-1/commands?wait=5" -H "Authorization: Bearer $TOKEN" \\
     -H 'Content-Type: application/json' -d '{{"name": "switch_on_off", "params": {{"state": "off"}}}}'; echo
curl -s "$B/v1/controllers/DEMO-PLUG-1/readings/summary?every=1d" -H "Authorization: Bearer $TOKEN"; echo
"""


def device_walkthrough_script(mqtt_port: int = 1884) -> str:
    """Play DEMO-PLUG-3 by hand with the Mosquitto clients, after the walk-through (it uses
    $B and $TOKEN); the README shows exactly this text."""
    secret = DEMO_DEVICE_SECRETS[HAND_PLAYED]
    return f"""\
M=${{M:-{mqtt_port}}}
PLUG3="-h 127.0.0.1 -p $M -i {HAND_PLAYED} -u {HAND_PLAYED} -P {secret}"
mosquitto_pub $PLUG3 -q 1 -t devices/{HAND_PLAYED}/state -m '{{"relay_state": "on", "power": [11.8]}}'; sleep 1
curl -s $B/v1/provider/fetch -H "Authorization: Bearer $TOKEN" \\
     -H 'Content-Type: application/json' -d '{{"serial_number": "{HAND_PLAYED}"}}'; echo
curl -s $B/v1/controllers/{HAND_PLAYED}/commands -H "Authorization: Bearer $TOKEN" \\
     -H 'Content-Type: application/json' -d '{{"name": "switch_on_off", "params": {{"state": "off"}}}}'; echo
COMMAND=$(mosquitto_sub $PLUG3 -q 1 -t devices/{HAND_PLAYED}/commands -C 1 -W 10); echo "$COMMAND"
ID=$(echo "$COMMAND" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
mosquitto_pub $PLUG3 -q 1 -t devices/{HAND_PLAYED}/commands/result -m '{{"id": "'$ID'", "status": "succeeded"}}'; sleep 1
curl -s $B/v1/controllers/{HAND_PLAYED}/commands/$ID -H "Authorization: Bearer $TOKEN"; echo
"""


ALREADY_FILLED = """\
The database already had data, so NO demo data was added now.
The walk-through below works only if that data is the demo's own from an earlier run;
for a fresh demo, stop the service and start it on an empty database (rm devicecontrol.db*).
"""


def web_app_line(base_url: str = "http://127.0.0.1:8000") -> str:
    """The web app's way in, as the README's walk-through says it."""
    return f"In a browser: open {base_url}/app/ and log in as {DEMO_USER} / {DEMO_PASSWORD}"


def walkthrough(base_url: str, *, added: bool = True, mqtt_port: int = 1884) -> str:
    """What ``demo`` and ``serve --demo`` print: the credentials and the walk-through.

    ``added=False`` (``serve --demo`` on a database that was not empty) says so first.
    """
    return f"""\
{"" if added else ALREADY_FILLED + chr(10)}Demo client: {DEMO_CLIENT_ID} / {DEMO_CLIENT_SECRET}
Demo users:  {DEMO_USER} / {DEMO_PASSWORD}   {FRIEND_USER} / {FRIEND_PASSWORD}
Unowned controllers: DEMO-PLUG-2, DEMO-BOBBIE-1 (claim code 7F3K-92QD)

{web_app_line(base_url)}

Try it from another shell:

{walkthrough_script(base_url)}
Then play {HAND_PLAYED} by hand with the Mosquitto clients, in the same shell:

{device_walkthrough_script(mqtt_port)}"""

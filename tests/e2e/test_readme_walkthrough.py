"""The README's curl walk-through works verbatim against `devicecontrol serve --demo`, and so
does docs/DEVICES.md's play-a-device block (the README's lines that log in, then its own)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx

from devicecontrol.demo import data as demo
from tests.e2e.support import demo_bearer, wait_until_reporting
from tests.processes import child_environment, free_port, running_server

README = Path(__file__).resolve().parents[2] / "README.md"
DEVICES_GUIDE = README.parent / "docs" / "DEVICES.md"
BLOCK = re.compile(
    r"<!-- walkthrough:start -->\n```sh\n(?P<script>.*?)```\n<!-- walkthrough:end -->", re.DOTALL
)
DEVICE_BLOCK = re.compile(
    r"<!-- devices:start -->\n```sh\n(?P<script>.*?)```\n<!-- devices:end -->", re.DOTALL
)
GUIDE_BLOCK = re.compile(
    r"<!-- devices-guide:start -->\n```sh\n(?P<script>.*?)```\n<!-- devices-guide:end -->",
    re.DOTALL,
)
EVENTS_BLOCK = re.compile(
    r"<!-- events:start -->\n```sh\n(?P<script>.*?)```\n<!-- events:end -->", re.DOTALL
)
WALKTHROUGH_TIMEOUT_S = 120


def readme_walkthrough(block: re.Pattern[str] = BLOCK, document: Path = README) -> str:
    found = block.findall(document.read_text(encoding="utf-8"))
    assert len(found) == 1, f"{document.name} needs exactly one ```sh block between its markers"
    return found[0]


def devices_guide_block() -> str:
    return readme_walkthrough(GUIDE_BLOCK, DEVICES_GUIDE)


def test_the_readme_walkthrough_is_the_text_the_demo_prints():
    assert readme_walkthrough().rstrip("\n") == demo.walkthrough_script().rstrip("\n")
    assert demo.walkthrough_script() in demo.walkthrough("http://127.0.0.1:8000")
    device_script = readme_walkthrough(DEVICE_BLOCK)
    assert device_script.rstrip("\n") == demo.device_walkthrough_script().rstrip("\n")
    assert demo.device_walkthrough_script(1999) in demo.walkthrough("http://x", mqtt_port=1999)


NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
           "ten", "eleven", "twelve"]  # fmt: skip


def test_the_readme_counts_and_names_the_routes_its_walkthrough_calls():
    text = README.read_text(encoding="utf-8")
    prose = text[text.index("## Walk-through") : text.index("<!-- walkthrough:start -->")]
    listed = set(re.findall(r"`(GET|POST|PATCH|DELETE) (/v1/[^`?]*)", prose))
    count = re.search(r"It calls (\w+) routes", prose)
    assert count, "the walk-through's text says how many routes it calls"
    assert NUMBERS.index(count[1]) == len(listed), sorted(listed)
    called = set(re.findall(r"\$B(/v1/[^\s\"?]+)", readme_walkthrough()))
    templates = {re.sub(r"\{[a-z_]+\}", "[^/]+", path) for _, path in listed}
    assert {p for p in called if not any(re.fullmatch(t, p) for t in templates)} == set()
    assert {t for t in templates if not any(re.fullmatch(t, p) for p in called)} == set()


def test_the_devices_guide_plays_the_readmes_free_device_with_the_readmes_lines():
    """docs/DEVICES.md: the walk-through's lines up to the token, then the devices block."""
    walkthrough_lines = readme_walkthrough().splitlines(keepends=True)
    up_to_the_token = [line.startswith("TOKEN=") for line in walkthrough_lines].index(True) + 1
    log_in = "".join(walkthrough_lines[:up_to_the_token])
    assert devices_guide_block() == log_in + readme_walkthrough(DEVICE_BLOCK)
    assert f"-i {demo.HAND_PLAYED} " in devices_guide_block()


def run_walkthrough(
    script: str, base_url: str, workdir: Path, mqtt_port: int | None = None
) -> list[dict]:
    assert shutil.which("curl"), "curl is needed to run the README walk-through; install it"
    assert shutil.which("python3"), "python3 (on PATH) is needed by the README walk-through"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=workdir,
        env=child_environment({"B": base_url, "M": str(mqtt_port or 1884)}),
        capture_output=True,
        text=True,
        timeout=WALKTHROUGH_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"walk-through failed ({done.returncode}):\n{done.stderr}"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    answers = [json.loads(line) for line in lines]
    assert all(isinstance(answer, dict) for answer in answers)
    return answers


def run_events_block(base_url: str, workdir: Path) -> str:
    """The README's live-events block after its log-in lines: what the stream printed."""
    lines = readme_walkthrough().splitlines(keepends=True)
    log_in = "".join(lines[: [line.startswith("TOKEN=") for line in lines].index(True) + 1])
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", log_in + readme_walkthrough(EVENTS_BLOCK)],
        cwd=workdir,
        env=child_environment({"B": base_url}),
        capture_output=True,
        text=True,
        timeout=WALKTHROUGH_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"events block failed ({done.returncode}):\n{done.stderr}"
    return done.stdout


def wait_until_the_simulated_demo_reports(base_url: str) -> None:
    """A person types slower than the simulated devices connect; the test waits instead."""
    with httpx.Client(base_url=base_url, timeout=10) as http:
        deadline = time.monotonic() + 15
        serials = ("DEMO-MELISSA-1", "DEMO-PLUG-1")
        wait_until_reporting(http, demo_bearer(http), serials, deadline)


def test_the_readme_walkthrough_runs_verbatim_against_serve_demo(tmp_path):
    script = readme_walkthrough()
    assert script.startswith("B=${B:-"), "the walk-through must take its base URL from $B"
    device_script = readme_walkthrough(DEVICE_BLOCK)
    assert device_script.startswith("M=${M:-"), "the device part takes the MQTT port from $M"
    server_dir, shell_dir = tmp_path / "server", tmp_path / "shell"
    server_dir.mkdir()
    shell_dir.mkdir()
    url = f"sqlite:///{server_dir / 'devicecontrol.db'}"
    mqtt_port = free_port()
    env = {"DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{mqtt_port}"}
    with running_server(url, server_dir, "--demo", env=env, device_link=True) as server:
        wait_until_the_simulated_demo_reports(server.base_url)
        answers = run_walkthrough(script + device_script, server.base_url, shell_dir, mqtt_port)
        # docs/DEVICES.md's block, as written, on the same server afterwards
        guide = devices_guide_block()
        guide_answers = run_walkthrough(guide, server.base_url, shell_dir, mqtt_port)
        streamed = run_events_block(server.base_url, shell_dir)
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            friend_headers = demo_bearer(http, demo.FRIEND_USER)
            friend = http.get("/v1/users/me", headers=friend_headers).json()["users"]
            friends_list = http.get("/v1/controllers", headers=friend_headers).json()

    # the stream: the plug online, then its new command queued, sent and succeeded, live
    assert 'event: online\ndata: {"serial_number":"DEMO-PLUG-1","online":true}' in streamed
    statuses = re.findall(r'event: command\ndata: .*"status":"(\w+)"', streamed)
    assert statuses[-3:] == ["queued", "sent", "succeeded"], streamed

    # every curl answers one JSON line, and so does the command the device received
    assert len(answers) == (script + device_script).count("curl -s") + 1, answers
    assert list(shell_dir.iterdir()) == [], "the walk-through must leave no file behind"
    login, renew, me, me_advanced, plugs, melissa, plug_2, bobbie, handed_over = answers[:9]
    fetched, sent, native, summary = answers[9:13]
    plug3_reading, plug3_made, plug3_received, plug3_done = answers[13:]

    assert re.fullmatch(r"[0-9a-f]{40}", login["auth"]["access_token"])
    assert re.fullmatch(r"[0-9a-f]{40}", login["auth"]["refresh_token"])
    assert re.fullmatch(r"[0-9a-f]{40}", renew["auth"]["access_token"])
    assert "refresh_token" not in renew["auth"]

    assert me["users"]["username"] == demo.DEMO_USER
    assert "_relation" not in me["users"]
    country = me_advanced["users"]["_relation"]["country"]
    assert (country["geoname_id"], country["country_code"], country["city_name"]) == (
        727011, "BG", "Sofia",
    )  # fmt: skip
    demo_user_id = me["users"]["user_id"]

    assert [c["serial_number"] for c in plugs["_embedded"]["controller"]] == [
        "DEMO-PLUG-1",
        "DEMO-PLUG-3",
    ]
    assert melissa["controller"]["serial_number"] == "DEMO-MELISSA-1"
    assert melissa["controller"]["user_id"] == demo_user_id

    for record, serial in ((plug_2, "DEMO-PLUG-2"), (bobbie, "DEMO-BOBBIE-1")):
        assert record["controller_reassign"]["serial_number"] == serial
        assert record["controller_reassign"]["user_id"] == demo_user_id
        assert record["controller_reassign"]["deleted_at"] is None
        assert record["_links"] == {"self": {"href": f"/v1/controllers/{serial}/assign"}}

    assert handed_over["controller_reassign"]["serial_number"] == "DEMO-PLUG-2"
    assert handed_over["controller_reassign"]["user_id"] == friend["user_id"]
    assert friend["user_id"] != demo_user_id
    assert [c["serial_number"] for c in friends_list["_embedded"]["controller"]] == ["DEMO-PLUG-2"]

    # the devices: a real reading of the simulated melissa, commands it carried out
    provider = fetched["provider"]
    assert provider["online"] is True and 16 < provider["temp"] < 30
    assert sent["provider"]["status"] == "succeeded", sent
    assert (sent["provider"]["commandName"], sent["provider"]["deviceId"]) == (
        "send_ir_code",
        "DEMO-MELISSA-1",
    )
    assert sent["provider"]["commandParams"] == {"state": 1, "mode": 3, "temp": 22, "fan": 2}
    # the demo's three days of history, per local day in the demo user's Sofia
    days = summary["summary"]["buckets"]
    assert summary["summary"]["time_zone"] == "Europe/Sofia" and summary["summary"]["every"] == "1d"
    assert sum(day["count"] for day in days) >= 24 * 60 - 1, days
    assert any(day["energy_wh"] > 0 for day in days), days
    assert native["command"]["status"] == "succeeded", native
    assert native["command"]["result"] == {"applied": {"state": "off"}}
    # DEMO-PLUG-3, played by hand with the Mosquitto clients
    assert plug3_reading["provider"] == {"relay_state": "on", "power": [11.8], "online": False}
    assert plug3_made["command"]["status"] == "queued"
    assert plug3_received == {
        "id": plug3_made["command"]["id"],
        "name": "switch_on_off",
        "params": {"state": "off"},
        "expires_at": plug3_made["command"]["expires_at"],
    }
    assert plug3_done["command"]["status"] == "succeeded"

    # docs/DEVICES.md's block: log in, then the same play with a command of its own
    assert len(guide_answers) == guide.count("curl -s") + 1, guide_answers
    assert list(shell_dir.iterdir()) == [], "the devices guide must leave no file behind"
    guide_login, reading, made, received, done = guide_answers
    assert re.fullmatch(r"[0-9a-f]{40}", guide_login["auth"]["access_token"])
    assert reading["provider"] == {"relay_state": "on", "power": [11.8], "online": False}
    assert made["command"]["status"] == "queued"
    assert made["command"]["id"] != plug3_made["command"]["id"]
    assert received == {
        "id": made["command"]["id"],
        "name": "switch_on_off",
        "params": {"state": "off"},
        "expires_at": made["command"]["expires_at"],
    }
    assert done["command"]["status"] == "succeeded"

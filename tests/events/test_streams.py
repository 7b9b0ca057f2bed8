"""Live events (contract §11) from a real ``serve`` with two workers and its device link,
on SQLite and PostgreSQL: streams read as a client reads them, devices played by real MQTT
clients. One server per backend for the module; each test has users and controllers of
its own, so the tests cannot see each other's events.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta

import aiomqtt
import httpx
import msgspec
import pytest
from sqlalchemy import ScalarSelect, delete, func, select, update

from devicecontrol.clock import utcnow
from devicecontrol.config import Settings
from devicecontrol.database.tables import access_tokens, events, users
from devicecontrol.devices import identity, repository
from devicecontrol.events.slots import STREAMS_PER_USER
from devicecontrol.events.stream import MAX_WAITING
from devicecontrol.runtime import Runtime
from tests.devices.link.support import SECRET, next_command, served_token, switch_command
from tests.events.support import Reader, stream, unique
from tests.factories import CLIENT_ID, CLIENT_SECRET, make_client, make_controller, make_user
from tests.processes import Server, running_server


@asynccontextmanager
async def database(database_url: str) -> AsyncIterator[Runtime]:
    runtime = Runtime.from_settings(Settings(database_url=database_url))
    try:
        yield runtime
    finally:
        await runtime.close()


@pytest.fixture(scope="module")
def server(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``serve --workers 2`` with its device link, on the module's database."""

    async def app() -> None:
        async with database(module_database_url) as runtime:
            await make_client(runtime)

    asyncio.run(app())
    workdir = tmp_path_factory.mktemp("events-serve")
    with running_server(module_database_url, workdir, "--workers", "2", device_link=True) as s:
        yield s


@pytest.fixture
def url(module_database_url: str) -> str:
    return module_database_url


async def owner_with_plugs(url: str, count: int = 1) -> tuple[str, list[str]]:
    """A new user and ``count`` smart plugs of theirs, each with the device secret SECRET."""
    user = unique("streamer") + "@example.com"
    serials = [unique("EV-PLUG-") for _ in range(count)]
    async with database(url) as runtime:
        await make_user(runtime, user)
        for serial in serials:
            await make_controller(runtime, serial, owner=user)
            async with runtime.database.write() as connection:
                await repository.set_device_secret(
                    connection, serial, identity.device_secret_digest(SECRET), utcnow()
                )
    return user, serials


def device(server: Server, serial: str) -> aiomqtt.Client:
    return aiomqtt.Client(
        "127.0.0.1", server.mqtt_port, identifier=serial, username=serial, password=SECRET
    )


async def call(
    server: Server, method: str, path: str, token: str | None, body: object = None
) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as http:
        return await http.request(method, path, headers=headers, json=body)


async def samples(server: Server) -> dict[str, float]:
    """``name{labels}`` -> value, from GET /metrics."""
    text = (await call(server, "GET", "/metrics", None)).text
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def assert_ids_never_go_down(seen: list[str | None]) -> None:
    assert all(i is not None for i in seen), seen
    numbers = [int(i) for i in seen if i is not None]
    assert numbers == sorted(numbers), seen


async def test_a_stream_shows_online_readings_and_each_command_status_as_they_happen(server, url):
    user, [serial] = await owner_with_plugs(url)
    token = served_token(server, user)
    async with stream(server.base_url, f"/v1/controllers/{serial}/events", token) as events_:
        assert events_.response.status_code == 200
        assert events_.response.headers["content-type"].startswith("text/event-stream")
        opening = await events_.next()
        assert (opening.event, opening.data) == (
            "online",
            {"serial_number": serial, "online": False},
        )
        seen = [opening.id]
        async with device(server, serial) as plug:
            await plug.subscribe(f"devices/{serial}/commands", qos=1)
            came = await events_.until("online", online=True)
            seen.append(came.id)
            await plug.publish(
                f"devices/{serial}/state", b'{"relay_state": "on", "power": 3.5}', qos=1
            )
            reading = await events_.until("reading")
            assert reading.data["serial_number"] == serial
            assert reading.data["reading"]["power"] == 3.5
            assert reading.data["reading"]["created"]
            seen.append(reading.id)
            command_id = await asyncio.to_thread(switch_command, server, token, serial, "off")
            statuses = []
            for expected in ("queued", "sent"):
                event = await events_.until("command")
                seen.append(event.id)
                statuses.append(event.data["command"]["status"])
                assert event.data["command"]["id"] == command_id
                assert event.data["command"]["_links"]["self"]["href"] == (
                    f"/v1/controllers/{serial}/commands/{command_id}"
                )
                assert expected in statuses
            delivered = await next_command(plug)
            await plug.publish(
                f"devices/{serial}/commands/result",
                msgspec.json.encode({"id": delivered["id"], "status": "succeeded"}),
                qos=1,
            )
            done = await events_.until("command")
            seen.append(done.id)
            assert done.data["command"]["status"] == "succeeded"
            # the event is the command as its read shows it
            path = f"/v1/controllers/{serial}/commands/{command_id}"
            read = (await call(server, "GET", path, token)).json()["command"]
            assert done.data["command"] == read
        gone = await events_.until("online", online=False)
        seen.append(gone.id)
        # the metrics, summed over the workers: this stream is open, its events were sent
        # (other tests' streams add to them, never take away)
        metrics = await samples(server)
        assert metrics["devicecontrol_event_streams_open"] >= 1
        for kind in ("online", "reading", "command"):
            assert metrics[f'devicecontrol_events_sent_total{{type="{kind}"}}'] >= 1
    assert_ids_never_go_down(seen)
    for _ in range(50):  # closed: counted as the client's doing, once the worker notices
        closed = await samples(server)
        if closed.get('devicecontrol_event_streams_closed_total{reason="client_closed"}', 0):
            break
        await asyncio.sleep(0.1)
    assert closed['devicecontrol_event_streams_closed_total{reason="client_closed"}'] >= 1


async def test_who_may_open_a_stream_is_decided_before_any_byte(server, url):
    _, [hers] = await owner_with_plugs(url)
    bob, _ = await owner_with_plugs(url)
    bobs = served_token(server, bob)
    for path, token, status in (
        (f"/v1/controllers/{hers}/events", bobs, 404),  # someone else's
        ("/v1/controllers/NO-SUCH-PLUG/events", bobs, 404),
        ("/v1/controllers/events", None, 401),
        (f"/v1/controllers/{hers}/events", None, 401),
        (f"/v1/controllers/{hers}/events", "not-a-token", 401),
    ):
        async with stream(server.base_url, path, token) as refused:
            assert refused.response.status_code == status, path
            assert refused.response.headers["content-type"] == "application/problem+json"
            body = msgspec.json.decode(await refused.response.aread())
            assert body["status"] == status


async def test_the_all_controllers_stream_follows_claims_hand_overs_and_releases(server, url):
    ana, [first, second] = await owner_with_plugs(url, 2)
    bob, _ = await owner_with_plugs(url, 0)
    async with database(url) as runtime:
        claimable = unique("EV-FREE-")
        await make_controller(runtime, claimable)
    token = served_token(server, ana)
    async with stream(server.base_url, "/v1/controllers/events", token) as all_:
        opened = {(await all_.next()).data["serial_number"] for _ in range(2)}
        assert opened == {first, second}
        async with stream(server.base_url, f"/v1/controllers/{second}/events", token) as one:
            await one.next()  # its online
            claimed = await call(server, "POST", f"/v1/controllers/{claimable}/assign", token)
            assert claimed.status_code in (200, 201), claimed.text
            gained = await all_.until("online", serial_number=claimable)
            assert gained.data == {"serial_number": claimable, "online": False}
            handed = await call(
                server, "PATCH", f"/v1/controllers/{first}/reassign", token, {"owner": bob}
            )
            assert handed.status_code == 200, handed.text
            end = await all_.until("end", serial_number=first)
            assert end.data == {"serial_number": first, "reason": "owner changed"}
            released = await call(server, "DELETE", f"/v1/controllers/{second}/assign", token)
            assert released.status_code in (200, 204), released.text
            # the one-controller stream ends with its controller; the other goes on
            rest = await one.ended()
            assert [(e.event, e.data) for e in rest][-1] == (
                "end",
                {"serial_number": second, "reason": "released"},
            )
            end = await all_.until("end", serial_number=second)
            assert end.data["reason"] == "released"
        # what the others now own reaches this stream no more; its new controller's does
        bobs = served_token(server, bob)
        await asyncio.to_thread(switch_command, server, bobs, first, "on")
        await asyncio.to_thread(switch_command, server, token, claimable, "on")
        event = await all_.until("command")
        assert event.data["serial_number"] == claimable


async def test_last_event_id_resumes_where_the_client_stopped_and_a_lost_past_is_a_gap(server, url):
    user, [serial] = await owner_with_plugs(url)
    token = served_token(server, user)
    path = f"/v1/controllers/{serial}/events"
    async with stream(server.base_url, path, token) as first:
        last = (await first.next()).id
    missed = await asyncio.to_thread(switch_command, server, token, serial, "on")
    async with stream(server.base_url, path, token, last_event_id=last) as resumed:
        replayed = await resumed.next()
        assert replayed.event == "command"
        assert replayed.data["command"]["id"] == missed
        assert int(replayed.id or 0) > int(last or 0)
        assert (await resumed.next()).event == "online"  # then the state as it is now
    # an id past everything the log holds, or older than what it keeps: a gap first
    for state in ("off", "on"):  # the log holds 3 events of this user's at least
        await asyncio.to_thread(switch_command, server, token, serial, state)
    async with database(url) as runtime:
        async with runtime.database.read() as connection:
            newest = (await connection.execute(select(func.max(events.c.id)))).scalar_one()
        async with runtime.database.write() as connection:  # as a purge of the past would
            await connection.execute(delete(events).where(events.c.id < newest))
    for stale in (str(newest + 10_000), str(newest - 2)):
        async with stream(server.base_url, path, token, last_event_id=stale) as behind:
            gap = await behind.next()
            assert gap.event == "gap", stale
            assert (await behind.next()).event == "online"


async def test_a_user_has_at_most_ten_streams_open_and_the_next_is_429(server, url):
    user, [serial] = await owner_with_plugs(url)
    token = served_token(server, user)
    path = f"/v1/controllers/{serial}/events"
    async with asyncio.timeout(30):
        opened: list[Reader] = []
        managers = [stream(server.base_url, path, token) for _ in range(STREAMS_PER_USER)]
        try:
            for manager in managers:
                reader = await manager.__aenter__()
                assert reader.response.status_code == 200
                await reader.next()
                opened.append(reader)
            async with stream(server.base_url, path, token) as eleventh:
                assert eleventh.response.status_code == 429
                assert int(eleventh.response.headers["retry-after"]) >= 1
        finally:
            for manager in managers[: len(opened)]:
                await manager.__aexit__(None, None, None)
    # a closed stream frees its place (the worker notices the close, then frees it)
    for _ in range(50):
        async with stream(server.base_url, path, token) as again:
            if again.response.status_code == 200:
                return
        await asyncio.sleep(0.1)
    raise AssertionError("closed streams never freed their places")


@pytest.mark.parametrize("module_database_url", ["sqlite"], indirect=True)
async def test_a_stream_ends_when_its_token_expires_or_is_revoked_and_keeps_alive_meanwhile(
    server, url
):
    """Waits out a keep-alive (15 s) and a token check (10 s): on SQLite alone, since the
    token is read by the same statement as every request's, tested on both backends."""
    user, [serial] = await owner_with_plugs(url)
    path = f"/v1/controllers/{serial}/events"
    expiring = served_token(server, user)
    async with database(url) as runtime, runtime.database.write() as connection:
        await connection.execute(  # the user's only token yet: it expires in 3 s
            update(access_tokens)
            .where(access_tokens.c.user_id == user_id_of(user))
            .values(expires_at=utcnow() + timedelta(seconds=3))
        )
    revoked, kept = served_token(server, user), served_token(server, user)

    async def ends_at_expiry() -> None:
        async with stream(server.base_url, path, expiring) as short:
            await short.next()
            await short.ended(within=10)  # at its expiry, not at the next check

    async def ends_when_revoked() -> None:
        async with stream(server.base_url, path, revoked) as cut:
            await cut.next()
            body = {"token": revoked, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
            response = await call(server, "POST", "/v1/auth/revoke", None, body)
            assert response.status_code == 200, response.text
            await cut.ended(within=15)  # CHECK_TOKEN_S, and a margin for a loaded run

    async def kept_alive() -> None:
        async with stream(server.base_url, path, kept) as quiet:
            await quiet.next()
            reading = asyncio.create_task(quiet.next(within=30))  # notes the comments
            try:
                for _ in range(170):  # a keep-alive comment comes at least every 15 s
                    if "keep-alive" in quiet.comments:
                        break
                    await asyncio.sleep(0.1)
                assert "keep-alive" in quiet.comments
                assert not reading.done()  # a comment, not an event
            finally:
                reading.cancel()

    # side by side: the three waits overlap
    await asyncio.gather(ends_at_expiry(), ends_when_revoked(), kept_alive())


def user_id_of(username: str) -> ScalarSelect[int]:
    return select(users.c.id).where(users.c.username == username).scalar_subquery()


@pytest.mark.parametrize("backend", ["sqlite"])  # how a process stops: the same on both
async def test_sigterm_ends_open_streams_at_once_and_the_process_exits_cleanly(
    backend, database_url, tmp_path
):
    async with database(database_url) as runtime:
        await make_client(runtime)
    user, [serial] = await owner_with_plugs(database_url)
    with running_server(database_url, tmp_path, "--workers", "2") as own:
        token = served_token(own, user)
        async with stream(own.base_url, f"/v1/controllers/{serial}/events", token) as open_:
            await open_.next()
            started = asyncio.get_running_loop().time()
            os.killpg(own.process.pid, signal.SIGTERM)
            await open_.ended(within=10)
            assert await asyncio.to_thread(own.process.wait, 15) == 0
        # not the 30 s graceful timeout a stream would otherwise hold the drain for
        assert asyncio.get_running_loop().time() - started < 10
        assert "Traceback" not in own.stderr()


async def test_a_request_the_streams_lane_declines_is_streamed_by_the_framework_alike(server, url):
    """Two Last-Event-ID headers: the lane hands the request to Litestar's route, which
    streams the same events (the route also answers every refusal)."""
    user, [serial] = await owner_with_plugs(url)
    token = served_token(server, user)
    headers = [("Authorization", f"Bearer {token}"), ("Last-Event-ID", "x"), ("Last-Event-ID", "y")]
    async with (
        httpx.AsyncClient(base_url=server.base_url, timeout=10) as http,
        http.stream("GET", f"/v1/controllers/{serial}/events", headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        reader = Reader(response)
        opening = await reader.next()
        assert opening.data == {"serial_number": serial, "online": False}
        made = await asyncio.to_thread(switch_command, server, token, serial, "on")
        assert (await reader.until("command")).data["command"]["id"] == made


@pytest.mark.parametrize("backend", ["sqlite"])  # a socket's behaviour: the same on both
async def test_a_reader_that_does_not_read_is_cut_off_and_its_memory_freed(
    backend, database_url, tmp_path
):
    """A client that never reads its stream while its device reports thousands of readings:
    past MAX_WAITING events behind, its connection is closed and the metric says why."""
    async with database(database_url) as runtime:
        await make_client(runtime)
    user, [serial] = await owner_with_plugs(database_url)
    env = {"DEVICECONTROL_DEVICE_MESSAGE_RATE": "100000/1"}
    with running_server(database_url, tmp_path, env=env, device_link=True) as own:
        token = served_token(own, user)
        port = int(own.base_url.rpartition(":")[2])
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that is slow
        raw.connect(("127.0.0.1", port))
        raw.sendall(
            f"GET /v1/controllers/{serial}/events HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        async with device(own, serial) as plug:
            padding = "x" * 1000  # each event about a kilobyte
            for n in range(4 * MAX_WAITING):
                body = msgspec.json.encode({"n": n, "note": padding})
                await plug.publish(f"devices/{serial}/state", body, qos=0)
                if n % 200 == 0:
                    await asyncio.sleep(0.05)

            async def closed() -> float:
                metrics = (await call(own, "GET", "/metrics", None)).text
                return sum(
                    float(line.rpartition(" ")[2])
                    for line in metrics.splitlines()
                    if line.startswith("devicecontrol_event_streams_closed_total")
                    and 'reason="slow_reader"' in line
                )

            for _ in range(100):
                if await closed() >= 1:
                    break
                await asyncio.sleep(0.1)
            assert await closed() >= 1
        # what the socket still holds, then the end the server wrote: it was closed
        raw.settimeout(10)
        while raw.recv(65536):
            pass
        raw.close()

"""Two `devicecontrol serve` processes on one database: tokens, revocation, throttles, races.

Each test starts two real servers (A and B, separate working directories) on the same
database, provisioned with the command line (which also acts while they serve). Whatever one
process writes (a token, a throttled failure, an owner) the other must see on its very next
request: the database is the only state they share. The one exception is a revoked access
token, which each process may keep serving from its token cache for at most
DEVICECONTROL_TOKEN_CACHE_MS (500 ms): the tests poll for its end and hold it to one second.
On PostgreSQL (the issue's deployment) and on SQLite (two processes on one file, also
supported).

The tests with the default settings share one pair of servers per backend, as do the two
with tight throttles (each start-up costs seconds): each test provisions users and
controllers of its own (``people``, ``mac``), so no test sees another's rows, tokens or
throttle counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from devicecontrol.database.tables import controller_assignments, controllers
from tests.cli.support import run_cli_in_process
from tests.e2e.support import (
    Client,
    bearer,
    controller,
    in_database,
    log_in,
    ok,
    provision,
    token_call,
    tokens,
)
from tests.factories import INVALID_TOKEN
from tests.processes import Server, running_servers

APP = Client("two-procs-app", "two-procs-client-secret-0123456789")
PASSWORD = "two-procs-password-1"
NEW_PASSWORD = "two-procs-password-2"
HTTP_TIMEOUT_S = 15  # every request of this file is bounded; a local answer takes ms
THROTTLED = {
    "DEVICECONTROL_THROTTLE_LOGIN_PER_USERNAME": "3/900",
    "DEVICECONTROL_THROTTLE_CLAIM_PER_CONTROLLER": "3/900",
}
GUESSES = 12  # concurrent guesses against one throttle


def people(test: str, *names: str) -> list[str]:
    """Usernames of this test's own (``ana`` -> ``ana.TEST@example.com``) on a shared
    database: no other test logs them in, fails their log-ins or changes them."""
    return [f"{name}.{test}@example.com" for name in names]


def provision_people(database_url: str, usernames: list[str], *controllers_: dict) -> None:
    provision(database_url, users=dict.fromkeys(usernames, PASSWORD), controllers=controllers_)


def mac(block: int, index: int) -> str:
    """A MAC no other test registers: one block of 256 per test."""
    return f"02000000{block:02X}{index:02X}"


def unowned(block: int, index: int, serial: str, claim_code: str = "") -> dict[str, str]:
    """An unowned smart plug (MAC from ``block`` and ``index``), with a claim code or none."""
    return controller(serial, mac(block, index), claim_code=claim_code)


@dataclass
class Pair:
    """Two servers on one database, each with its own HTTP client."""

    server_a: Server
    server_b: Server
    a: httpx.Client
    b: httpx.Client

    @property
    def both(self) -> tuple[httpx.Client, httpx.Client]:
        return (self.a, self.b)


@contextmanager
def two_servers(
    database_url: str, tmp_path: Path, env: dict[str, str] | None = None
) -> Iterator[Pair]:
    """Servers A and B, started side by side and stopped when the block ends.

    Neither may have logged a traceback by then.
    """
    workdirs = [tmp_path / "server-a", tmp_path / "server-b"]
    with running_servers(database_url, workdirs, env) as (server_a, server_b), ExitStack() as stack:
        assert server_a.base_url != server_b.base_url
        a = stack.enter_context(httpx.Client(base_url=server_a.base_url, timeout=HTTP_TIMEOUT_S))
        b = stack.enter_context(httpx.Client(base_url=server_b.base_url, timeout=HTTP_TIMEOUT_S))
        yield Pair(server_a, server_b, a, b)


@pytest.fixture(scope="module")
def shared_database_url(module_database_url: str) -> str:
    """The module's database, with the app registered once for every test."""
    provision(module_database_url, client=APP)
    return module_database_url


@pytest.fixture(scope="module")
def pair(shared_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Servers A and B with the default settings, shared by the tests of this module."""
    with two_servers(shared_database_url, tmp_path_factory.mktemp("default-pair")) as servers:
        yield servers


@pytest.fixture(scope="module")
def throttled_pair(
    shared_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    """Servers A and B with tight log-in and claim throttles (``THROTTLED``), shared."""
    workdir = tmp_path_factory.mktemp("throttled-pair")
    with two_servers(shared_database_url, workdir, env=THROTTLED) as servers:
        yield servers


# a renewal as JSON, the other body the token endpoints take
renew = partial(token_call, client=APP, path="renew", as_json=True)


def revoke(http: httpx.Client, token: str) -> None:
    """RFC 7009 revocation, form-encoded as the RFC has it."""
    response = token_call(http, APP, "revoke", token=token)
    assert response.status_code == 200, response.text


def me(http: httpx.Client, access_token: str) -> httpx.Response:
    return http.get("/v1/users/me", headers=bearer(access_token))


def assert_works(http: httpx.Client, access_token: str, username: str) -> None:
    response = me(http, access_token)
    assert response.status_code == 200, response.text
    assert response.json()["users"]["username"] == username


def assert_invalid_token(http: httpx.Client, access_token: str) -> None:
    for path in ("/v1/users/me", "/v1/controllers"):
        response = http.get(path, headers=bearer(access_token))
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == INVALID_TOKEN


# a cache may serve a revoked token or a reassigned controller for up to a second
STALENESS_BOUND_S = 1.0
POLL_S = 0.01


def seconds_until_refused(http: httpx.Client, access_token: str) -> float:
    """Call until the token is refused, asserting it never outlives the bound; the wait."""
    started = time.monotonic()
    while True:
        response = me(http, access_token)
        waited = time.monotonic() - started
        if response.status_code == 401:
            assert response.headers["www-authenticate"] == INVALID_TOKEN
            return waited
        assert response.status_code == 200, response.text
        assert waited <= STALENESS_BOUND_S, f"a revoked token still worked after {waited:.2f} s"
        time.sleep(POLL_S)


def assert_refused_within_the_bound(http: httpx.Client, access_token: str) -> None:
    seconds_until_refused(http, access_token)
    assert_invalid_token(http, access_token)  # and it stays refused, on every path


def assert_invalid_grant(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_grant"


def assert_throttled(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert 1 <= int(response.headers["retry-after"]) <= 900 + 1  # rounded up


async def _all_at_once(
    pair: Pair, requests: list[tuple[str, str, str, dict[str, str], dict | None]]
) -> list[httpx.Response]:
    """Send (server "a"/"b", method, path, headers, json) requests concurrently."""
    async with (
        httpx.AsyncClient(base_url=pair.server_a.base_url, timeout=HTTP_TIMEOUT_S) as a,
        httpx.AsyncClient(base_url=pair.server_b.base_url, timeout=HTTP_TIMEOUT_S) as b,
    ):
        clients = {"a": a, "b": b}
        # open one connection per request first, so that the race is not a connect race
        await asyncio.gather(
            *(clients[s].get("/v1/users/me", headers=h) for s, _, _, h, _ in requests)
        )
        return await asyncio.gather(
            *(
                clients[s].request(method, path, headers=h, json=body)
                for s, method, path, h, body in requests
            )
        )


def all_at_once(pair: Pair, requests) -> list[httpx.Response]:
    responses = asyncio.run(_all_at_once(pair, requests))
    for response in responses:
        assert response.status_code < 500, response.text
    return responses


# --- 1. tokens ---------------------------------------------------------------------------


def test_a_token_issued_by_one_process_works_on_the_other(pair, shared_database_url):
    [ana] = people("tokens", "ana")
    owned = controller("TP-OWNED-1", mac(1, 1), "melissa", owner=ana)
    provision_people(shared_database_url, [ana], owned)
    auth = tokens(pair.a, APP, ana, PASSWORD)
    assert_works(pair.b, auth["access_token"], ana)
    listed = pair.b.get("/v1/controllers", headers=bearer(auth["access_token"]))
    assert listed.status_code == 200, listed.text
    assert [c["serial_number"] for c in listed.json()["_embedded"]["controller"]] == ["TP-OWNED-1"]

    renewed = renew(pair.b, refresh_token=auth["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    access_from_b = renewed.json()["auth"]["access_token"]
    assert access_from_b != auth["access_token"]
    assert_works(pair.a, access_from_b, ana)
    one = pair.a.get("/v1/controllers/TP-OWNED-1", headers=bearer(access_from_b))
    assert one.status_code == 200, one.text

    # and the other way round: B's login, A's renewal
    auth_b = tokens(pair.b, APP, ana, PASSWORD)
    assert_works(pair.a, auth_b["access_token"], ana)
    renewed_on_a = renew(pair.a, refresh_token=auth_b["refresh_token"])
    assert renewed_on_a.status_code == 200, renewed_on_a.text
    assert_works(pair.b, renewed_on_a.json()["auth"]["access_token"], ana)


# --- 2. revocation -----------------------------------------------------------------------


def test_a_revocation_holds_at_once_where_made_and_within_a_second_elsewhere(
    pair, shared_database_url
):
    [ana] = people("revocation", "ana")
    provision_people(shared_database_url, [ana])
    first = tokens(pair.a, APP, ana, PASSWORD)
    second = tokens(pair.b, APP, ana, PASSWORD)
    for http in pair.both:
        assert_works(http, first["access_token"], ana)

    # an access token revoked on A is dead on A at once, and on B within the bound
    revoke(pair.a, first["access_token"])
    assert_invalid_token(pair.a, first["access_token"])
    assert_refused_within_the_bound(pair.b, first["access_token"])
    # its refresh token was not revoked: renewing on B still works
    renewed = renew(pair.b, refresh_token=first["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    renewed_access = renewed.json()["auth"]["access_token"]
    assert_works(pair.a, renewed_access, ana)

    # the refresh token revoked on B: no renewal on A, and every access token from it ends
    revoke(pair.b, first["refresh_token"])
    assert_invalid_grant(renew(pair.a, refresh_token=first["refresh_token"]))
    assert_invalid_grant(renew(pair.b, refresh_token=first["refresh_token"]))
    assert_invalid_token(pair.b, renewed_access)
    for http in pair.both:
        assert_refused_within_the_bound(http, renewed_access)
        assert_invalid_token(http, first["access_token"])
        # the other login's tokens are untouched
        assert_works(http, second["access_token"], ana)
    assert renew(pair.a, refresh_token=second["refresh_token"]).status_code == 200


# --- 3. operators' commands while both serve ---------------------------------------------


def test_set_password_and_disable_end_the_users_tokens_on_both_processes(pair, shared_database_url):
    ana, bob = people("operators", "ana", "bob")
    provision_people(shared_database_url, [ana, bob])
    ana_a, ana_b = tokens(pair.a, APP, ana, PASSWORD), tokens(pair.b, APP, ana, PASSWORD)
    bob_auth = tokens(pair.b, APP, bob, PASSWORD)
    for http in pair.both:
        assert_works(http, ana_a["access_token"], ana)

    ok(
        run_cli_in_process(
            "users", "set-password", ana, "--password", NEW_PASSWORD,
            database_url=shared_database_url,
        )
    )  # fmt: skip
    for http in pair.both:
        assert_refused_within_the_bound(http, ana_a["access_token"])
        assert_refused_within_the_bound(http, ana_b["access_token"])
        assert_invalid_grant(renew(http, refresh_token=ana_a["refresh_token"]))
        assert_invalid_grant(renew(http, refresh_token=ana_b["refresh_token"]))
        assert_works(http, bob_auth["access_token"], bob)
    assert_invalid_grant(log_in(pair.a, APP, ana, PASSWORD))
    ana_new = tokens(pair.b, APP, ana, NEW_PASSWORD)
    assert_works(pair.a, ana_new["access_token"], ana)

    ok(run_cli_in_process("users", "disable", ana, database_url=shared_database_url))
    for http in pair.both:
        assert_refused_within_the_bound(http, ana_new["access_token"])
        assert_invalid_grant(renew(http, refresh_token=ana_new["refresh_token"]))
        assert_invalid_grant(log_in(http, APP, ana, NEW_PASSWORD))
        assert_works(http, bob_auth["access_token"], bob)
        assert renew(http, refresh_token=bob_auth["refresh_token"]).status_code == 200


# --- 4. throttling -----------------------------------------------------------------------


def test_failed_logins_split_across_the_processes_are_counted_together(
    throttled_pair, shared_database_url
):
    pair = throttled_pair
    ana, bob, carol = people("logins", "ana", "bob", "carol")
    provision_people(shared_database_url, [ana, bob])
    for http in (pair.a, pair.b, pair.a):  # 3 failures, neither process saw 3 itself
        assert_invalid_grant(log_in(http, APP, ana, "wrong-password"))
    for http in (pair.b, pair.a):  # the right password is not even looked at
        assert_throttled(log_in(http, APP, ana, PASSWORD))
    same_username = ana.replace("ana.", "ANA.", 1)  # the same username, its case aside
    assert_throttled(log_in(pair.b, APP, same_username, PASSWORD))
    for http in pair.both:  # another username is not held back
        assert log_in(http, APP, bob, PASSWORD).status_code == 200

    # concurrent guesses on both processes: only the first 3 are checked at all
    guesses = all_at_once(
        pair,
        [
            ("ab"[i % 2], "POST", "/v1/auth/login", {},
             {"client_id": APP.client_id, "client_secret": APP.secret,
              "username": carol, "password": f"guess-{i}"})
            for i in range(GUESSES)
        ],
    )  # fmt: skip
    statuses = sorted(r.status_code for r in guesses)
    assert statuses == [400] * 3 + [429] * (GUESSES - 3), [r.text for r in guesses]


def test_wrong_claim_codes_split_across_the_processes_are_counted_together(
    throttled_pair, shared_database_url
):
    pair = throttled_pair
    ana, bob = people("claims", "ana", "bob")
    codes = [
        ("TP-CLAIM-1", "RIGHT-CODE"),
        ("TP-CLAIM-2", "OTHER-CODE"),
        ("TP-CLAIM-3", "THIRD-CODE"),
    ]
    claimable = [unowned(2, index, serial, code) for index, (serial, code) in enumerate(codes)]
    provision_people(shared_database_url, [ana, bob], *claimable)
    ana_auth = bearer(tokens(pair.a, APP, ana, PASSWORD)["access_token"])
    bob_auth = bearer(tokens(pair.b, APP, bob, PASSWORD)["access_token"])
    assign = "/v1/controllers/TP-CLAIM-1/assign"
    for http, body in ((pair.a, {"claim_code": "WRONG-1"}), (pair.b, {}),
                       (pair.a, {"claim_code": "WRONG-2"})):  # fmt: skip
        response = http.post(assign, headers=ana_auth, json=body)
        assert response.status_code == 403, response.text
    for http in (pair.b, pair.a):  # the right code is not even looked at
        assert_throttled(http.post(assign, headers=ana_auth, json={"claim_code": "RIGHT-CODE"}))
    # the limit is the controller's: another user with the right code waits too
    assert_throttled(pair.b.post(assign, headers=bob_auth, json={"claim_code": "RIGHT-CODE"}))
    # another controller is not held back
    other = pair.b.post(
        "/v1/controllers/TP-CLAIM-2/assign", headers=ana_auth, json={"claim_code": "OTHER-CODE"}
    )
    assert other.status_code == 200, other.text

    # concurrent guesses on both processes: only the first 3 are checked at all
    guesses = all_at_once(
        pair,
        [
            ("ab"[i % 2], "POST", "/v1/controllers/TP-CLAIM-3/assign", bob_auth,
             {"claim_code": f"GUESS-{i}"})
            for i in range(GUESSES)
        ],
    )  # fmt: skip
    statuses = sorted(r.status_code for r in guesses)
    assert statuses == [403] * 3 + [429] * (GUESSES - 3), [r.text for r in guesses]


# --- 5. ownership races across the processes ---------------------------------------------

RACERS = 10
RACED_CONTROLLERS = ["TP-RACE-1", "TP-RACE-2", "TP-RACE-3", "TP-RACE-4"]
RELEASE_ROUNDS = 6


def database_state(database_url: str, serial: str) -> tuple[int | None, list[int]]:
    """The controller's owner and the users of its active records, read from the database."""

    async def read(connection: AsyncConnection) -> tuple[int | None, list[int]]:
        row = (
            await connection.execute(
                select(controllers.c.id, controllers.c.user_id).where(
                    controllers.c.serial_number == serial
                )
            )
        ).one()
        active = (
            await connection.execute(
                select(controller_assignments.c.user_id).where(
                    controller_assignments.c.controller_id == row.id,
                    controller_assignments.c.deleted_at.is_(None),
                )
            )
        ).scalars()
        return row.user_id, list(active)

    return in_database(database_url, read, writing=False)


def test_assigns_racing_across_the_processes_leave_one_owner(pair, shared_database_url):
    emails = people("race", *(f"racer{i}" for i in range(RACERS)))
    raced = [unowned(3, index, serial) for index, serial in enumerate(RACED_CONTROLLERS)]
    provision_people(shared_database_url, emails, *raced)
    headers, user_ids = [], []
    for i, email in enumerate(emails):
        http = pair.both[i % 2]
        token = tokens(http, APP, email, PASSWORD)["access_token"]
        headers.append(bearer(token))
        user_ids.append(me(http, token).json()["users"]["user_id"])

    for round_, serial in enumerate(RACED_CONTROLLERS):
        responses = all_at_once(
            pair,
            [
                ("ab"[(i + round_) % 2], "POST", f"/v1/controllers/{serial}/assign", h, None)
                for i, h in enumerate(headers)
            ],
        )
        statuses = [r.status_code for r in responses]
        assert sorted(statuses) == [200] + [409] * (RACERS - 1), [r.text for r in responses]
        winner_index = statuses.index(200)
        record = responses[winner_index].json()["controller_reassign"]
        winner = user_ids[winner_index]
        assert (record["user_id"], record["deleted_at"]) == (winner, None)

        # the owner's history, read on either process: one active record, the winner's
        for http in pair.both:
            history = http.get(
                f"/v1/controllers/{serial}/assignments", headers=headers[winner_index]
            )
            assert history.status_code == 200, history.text
            records = history.json()["_embedded"]["controller_reassign"]
            active = [r for r in records if r["deleted_at"] is None]
            assert [(r["id"], r["user_id"]) for r in active] == [(record["id"], winner)]
            assert history.json()["total"] == 1
        loser_index = (winner_index + 1) % RACERS
        assert pair.b.get(
            f"/v1/controllers/{serial}/assignments", headers=headers[loser_index]
        ).status_code == 404  # fmt: skip

        # and the database agrees: the owner is the user of the one active record
        assert database_state(shared_database_url, serial) == (winner, [winner])


def test_reassign_racing_release_across_the_processes_ends_consistent(pair, shared_database_url):
    ana_name, bob_name = people("handover", "ana", "bob")
    serial = "TP-HANDOVER"
    owned = controller(serial, mac(4, 1), "melissa", owner=ana_name)
    provision_people(shared_database_url, [ana_name, bob_name], owned)
    database_url = shared_database_url
    ana_auth, bob_auth = (
        tokens(pair.a, APP, ana_name, PASSWORD),
        tokens(pair.b, APP, bob_name, PASSWORD),
    )
    ana, bob = bearer(ana_auth["access_token"]), bearer(bob_auth["access_token"])
    ana_id = me(pair.a, ana_auth["access_token"]).json()["users"]["user_id"]
    bob_id = me(pair.b, bob_auth["access_token"]).json()["users"]["user_id"]
    outcomes = set()
    for round_ in range(RELEASE_ROUNDS):
        # give the controller back to ana, whoever ended up with it
        owner, _ = database_state(database_url, serial)
        if owner is None:
            back = pair.a.post(f"/v1/controllers/{serial}/assign", headers=ana)
        elif owner == bob_id:
            back = pair.b.patch(
                f"/v1/controllers/{serial}/reassign", headers=bob,
                json={"owner": ana_name},
            )  # fmt: skip
        else:
            back = None
        assert back is None or back.status_code == 200, back.text
        assert database_state(database_url, serial) == (ana_id, [ana_id])

        reassign_on, release_on = ("a", "b") if round_ % 2 == 0 else ("b", "a")
        reassigned, released = all_at_once(
            pair,
            [
                (reassign_on, "PATCH", f"/v1/controllers/{serial}/reassign", ana,
                 {"owner": bob_name}),
                (release_on, "DELETE", f"/v1/controllers/{serial}/assign", ana, None),
            ],
        )  # fmt: skip
        statuses = (reassigned.status_code, released.status_code)
        state = database_state(database_url, serial)
        if statuses == (200, 404):  # the hand-over came first: bob's, one record shows it
            record = reassigned.json()["controller_reassign"]
            assert (record["user_id"], record["deleted_at"]) == (bob_id, None)
            assert state == (bob_id, [bob_id])
            history = pair.a.get(f"/v1/controllers/{serial}/assignments", headers=bob)
            active = [
                r for r in history.json()["_embedded"]["controller_reassign"]
                if r["deleted_at"] is None
            ]  # fmt: skip
            assert [r["id"] for r in active] == [record["id"]]
        elif statuses == (404, 200):  # the release came first: unowned, no active record
            record = released.json()["controller_reassign"]
            assert record["user_id"] == ana_id and record["deleted_at"] is not None
            assert state == (None, [])
        else:
            raise AssertionError(f"{statuses}: {reassigned.text} {released.text}")
        outcomes.add(statuses)
    assert outcomes  # which order wins is up to the race; both are consistent


# --- 6. what may be cached, and for how long ---------------------------------------------


def test_without_the_token_cache_a_revocation_holds_everywhere_on_the_next_request(
    shared_database_url, tmp_path
):
    """A pair of its own, started with the token cache off, on the module's database."""
    [ana] = people("no-cache", "ana")
    provision_people(shared_database_url, [ana])
    env = {"DEVICECONTROL_TOKEN_CACHE_MS": "0"}
    with two_servers(shared_database_url, tmp_path, env=env) as no_cache:
        auth = tokens(no_cache.a, APP, ana, PASSWORD)
        for http in no_cache.both:
            assert_works(http, auth["access_token"], ana)
        revoke(no_cache.a, auth["access_token"])
        for http in no_cache.both:
            assert_invalid_token(http, auth["access_token"])


def test_a_reassigned_controller_is_gone_from_the_old_owner_at_once_on_both(
    pair, shared_database_url
):
    """Controllers are never cached: the hand-over shows on the very next read anywhere."""
    ana_name, bob_name = people("cache", "ana", "bob")
    owned = controller("TP-CACHE", mac(5, 1), "melissa", owner=ana_name)
    provision_people(shared_database_url, [ana_name, bob_name], owned)
    ana = bearer(tokens(pair.a, APP, ana_name, PASSWORD)["access_token"])
    bob = bearer(tokens(pair.b, APP, bob_name, PASSWORD)["access_token"])
    for http in pair.both:  # read (and so warm anything cacheable) on both first
        assert http.get("/v1/controllers/TP-CACHE", headers=ana).status_code == 200
        assert http.get("/v1/controllers", headers=ana).json()["total"] == 1
    handed_over = pair.a.patch(
        "/v1/controllers/TP-CACHE/reassign", headers=ana, json={"owner": bob_name}
    )
    assert handed_over.status_code == 200, handed_over.text
    for http in (pair.b, pair.a):
        assert http.get("/v1/controllers/TP-CACHE", headers=ana).status_code == 404
        assert http.get("/v1/controllers", headers=ana).json()["total"] == 0
        assert http.get("/v1/controllers/TP-CACHE", headers=bob).status_code == 200

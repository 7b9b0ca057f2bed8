"""The scenarios: for each, a rotation of concrete requests against the provisioned fleet.

Requests are drawn with a fixed seed from the token holders and what they own, so two runs
on the same fleet size send the same mix.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from urllib.parse import urlencode

import msgspec

from bench.fleet import HEAVY_USERS, serial_number, username
from bench.provision import CLIENT_ID, CLIENT_SECRET, PASSWORD, Provisioned

REQUESTS_PER_SCENARIO = 1000
SEED = 4
FORM = "application/x-www-form-urlencoded"
JSON_TYPE = {"Content-Type": "application/json"}
# logins run argon2 (at most two at once per process); a few connections saturate them, and
# more would only queue. The per-address throttle counts in-flight attempts (20 per minute)
# and the per-username one 5, so keep the in-flight logins well below both.
LOGIN_CONNECTIONS = 4
STORM = "storm"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    what: str
    requests: list[Request]
    connections: int | None = None  # None: the run's --connections


def _bearer(token: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **extra}


def _form(fields: dict[str, str]) -> tuple[dict[str, str], str]:
    return {"Content-Type": FORM}, urlencode(fields)


def reads(fixture: Provisioned, rng: random.Random) -> list[Request]:
    owned = [
        (user_id, index)
        for user_id in fixture.access_tokens
        for index in fixture.fleet.owned_by(user_id)
    ]
    picks = [rng.choice(owned) for _ in range(REQUESTS_PER_SCENARIO)]
    return [
        Request(
            "GET",
            f"/v1/controllers/{serial_number(index)}",
            _bearer(rng.choice(fixture.access_tokens[u])),
        )
        for u, index in picks
    ]


def fetches(fixture: Provisioned, rng: random.Random) -> list[Request]:
    """``POST /provider/fetch`` of a controller the caller owns, as the original clients
    poll a device's state (JSON body)."""
    return [
        Request(
            "POST",
            "/v1/provider/fetch",
            _bearer(read.headers["Authorization"].removeprefix("Bearer "), **JSON_TYPE),
            msgspec.json.encode({"serial_number": read.path.rsplit("/", 1)[1]}).decode(),
        )
        for read in reads(fixture, rng)
    ]


def list_pages(fixture: Provisioned, rng: random.Random, page_size: int) -> list[Request]:
    """Pages of the heavy users, who own enough controllers for every page to be full."""
    pages = 100 // page_size
    requests = []
    for _ in range(REQUESTS_PER_SCENARIO):
        user_id, page = rng.randint(1, HEAVY_USERS), rng.randint(1, pages)
        path = f"/v1/controllers?page={page}&page_size={page_size}"
        requests.append(Request("GET", path, _bearer(rng.choice(fixture.access_tokens[user_id]))))
    return requests


def profiles(fixture: Provisioned, rng: random.Random) -> list[Request]:
    holders = list(fixture.access_tokens)
    return [
        Request(
            "GET",
            "/v1/users/me",
            _bearer(
                rng.choice(fixture.access_tokens[rng.choice(holders)]),
                **{"Accept-Response": "Advanced"},
            ),
        )
        for _ in range(REQUESTS_PER_SCENARIO)
    ]


def renewals(fixture: Provisioned, rng: random.Random) -> list[Request]:
    holders = list(fixture.refresh_tokens)
    requests = []
    for _ in range(REQUESTS_PER_SCENARIO):
        headers, body = _form(
            {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "refresh_token": fixture.refresh_tokens[rng.choice(holders)],
            }
        )
        requests.append(Request("POST", "/v1/auth/renew", headers, body))
    return requests


def logins(fixture: Provisioned, rng: random.Random) -> list[Request]:
    holders = list(fixture.access_tokens)
    requests = []
    for _ in range(REQUESTS_PER_SCENARIO):
        headers, body = _form(
            {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "username": username(rng.choice(holders)),
                "password": PASSWORD,
            }
        )
        requests.append(Request("POST", "/v1/auth/login", headers, body))
    return requests


def build(fixture: Provisioned) -> dict[str, Scenario]:
    """Every scenario by name, in the order the table shows them."""
    rng = random.Random(SEED)
    read_requests = reads(fixture, rng)
    return {
        "read": Scenario("read", "GET /v1/controllers/{sn}", read_requests),
        "list25": Scenario(
            "list25", "GET /v1/controllers?page_size=25", list_pages(fixture, rng, 25)
        ),
        "list100": Scenario(
            "list100", "GET /v1/controllers?page_size=100", list_pages(fixture, rng, 100)
        ),
        "me": Scenario("me", "GET /v1/users/me, Accept-Response: Advanced", profiles(fixture, rng)),
        "fetch": Scenario("fetch", "POST /v1/provider/fetch (JSON)", fetches(fixture, rng)),
        "renew": Scenario("renew", "POST /v1/auth/renew (form)", renewals(fixture, rng)),
        "login": Scenario(
            "login", "POST /v1/auth/login (form)", logins(fixture, rng), LOGIN_CONNECTIONS
        ),
        # reads measured while a login wrk runs beside them; the logins ride along
        STORM: Scenario(STORM, "reads during a login storm", read_requests),
    }


SCENARIO_NAMES = ("read", "list25", "list100", "me", "fetch", "renew", "login", STORM)

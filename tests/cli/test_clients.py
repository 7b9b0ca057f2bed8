"""`devicecontrol clients create CLIENT_ID [--secret S]`."""

from __future__ import annotations

import hashlib
import re

import pytest

from devicecontrol.database.tables import clients
from tests.cli.support import assert_one_line_error, assert_succeeded, cli, rows, snapshot
from tests.conftest import SQLITE_ENOUGH
from tests.factories import login, make_client, make_user

pytestmark = SQLITE_ENOUGH


def printed_secret(stdout: str) -> str:
    found = re.findall(r"^client_secret: (\S+)$", stdout, flags=re.MULTILINE)
    assert len(found) == 1, stdout
    return found[0]


async def test_clients_create_prints_the_given_secret_once_and_stores_only_its_digest(
    database_url, runtime
):
    secret = "a-given-secret-of-some-length"
    result = await cli(
        "clients", "create", "phone-app", "--secret", secret, database_url=database_url
    )
    assert_succeeded(result)
    assert printed_secret(result.stdout) == secret
    assert result.stdout.count(secret) == 1
    [row] = await rows(runtime, clients)
    assert row.client_id == "phone-app"
    assert row.secret_digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in repr(await snapshot(runtime))


async def test_clients_create_generates_a_long_random_secret_when_none_is_given(
    database_url, runtime
):
    first = await cli("clients", "create", "app-1", database_url=database_url)
    second = await cli("clients", "create", "app-2", database_url=database_url)
    assert_succeeded(first)
    assert_succeeded(second)
    secrets = [printed_secret(first.stdout), printed_secret(second.stdout)]
    assert secrets[0] != secrets[1]
    assert all(len(secret) >= 32 for secret in secrets)
    stored = [row.secret_digest for row in await rows(runtime, clients)]
    assert stored == [hashlib.sha256(s.encode()).hexdigest() for s in secrets]


async def test_a_created_client_can_log_a_user_in(database_url, runtime, client):
    result = await cli("clients", "create", "cli-app", database_url=database_url)
    assert_succeeded(result)
    await make_user(runtime, "ana@example.com")
    auth = await login(
        client, "ana@example.com", client_id="cli-app", client_secret=printed_secret(result.stdout)
    )
    assert re.fullmatch(r"[0-9a-f]{40}", auth["access_token"])


@pytest.mark.parametrize("secret", ["mclimate_core", "x", "fifteen-chars.."])
async def test_a_given_short_secret_is_accepted_with_a_one_line_warning(
    secret, database_url, runtime, client
):
    """Published apps carry their secrets in their code (contract §5): accepted, but warned."""
    result = await cli(
        "clients", "create", "mclimate", "--secret", secret, database_url=database_url
    )
    assert_succeeded(result)
    assert printed_secret(result.stdout) == secret
    [warning] = result.stderr.splitlines()
    assert warning.startswith("Warning: the secret of mclimate is shorter than 16 characters")
    assert secret not in warning
    await make_user(runtime, "ana@example.com")
    auth = await login(client, "ana@example.com", client_id="mclimate", client_secret=secret)
    assert re.fullmatch(r"[0-9a-f]{40}", auth["access_token"])


async def test_a_given_secret_of_16_characters_or_more_gets_no_warning(database_url):
    result = await cli(
        "clients", "create", "app", "--secret", "sixteen-chars..!", database_url=database_url
    )
    assert_succeeded(result)
    assert result.stderr == ""


async def test_clients_create_with_an_existing_id_fails_and_keeps_the_first(database_url, runtime):
    await make_client(runtime, "taken-app", "the-first-secret-0123")
    before = await snapshot(runtime)
    result = await cli(
        "clients",
        "create",
        "taken-app",
        "--secret",
        "another-secret-0123",
        database_url=database_url,
    )
    assert_one_line_error(result, "taken-app", "already exists")
    assert await snapshot(runtime) == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["empty-app", "--secret", ""], "secret: must not be empty"),
        (["bad id!"], "client_id"),
        (["x" * 101], "client_id"),
    ],
    ids=["empty secret", "bad characters", "too long"],
)
async def test_clients_create_with_bad_input_fails_in_one_line_and_writes_nothing(
    args, fragment, database_url, runtime
):
    before = await snapshot(runtime)
    result = await cli("clients", "create", *args, database_url=database_url)
    assert_one_line_error(result, fragment)
    assert await snapshot(runtime) == before

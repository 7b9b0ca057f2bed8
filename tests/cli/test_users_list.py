"""`devicecontrol users list [--disabled/--active] [--email-contains T] [--limit N] [--format]`."""

from __future__ import annotations

import json
import re

import pytest

from devicecontrol.database.tables import users
from devicecontrol.users.service import disable_user
from tests.cli.support import assert_one_line_error, assert_succeeded, cli, csv_column, rows
from tests.factories import make_controller, make_user

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
ACCOUNTS = (
    "Ana@Example.com",
    "ben@example.org",
    "carl@example.com",  # disabled
    "dora_x@example.net",  # "_" in a search is literal, not a wildcard
    "doraxx@example.net",
    "100%sure@example.net",  # and so is "%"
)


async def register_accounts(runtime) -> None:
    for email in ACCOUNTS:
        await make_user(runtime, email, phone="+359 2 123" if email.startswith("Ana") else None)
    await disable_user(runtime, "carl@example.com")
    await make_controller(runtime, "ANA-1", owner="ana@example.com")
    await make_controller(runtime, "ANA-2", owner="ana@example.com")


FILTERS = {
    "no filter": ([], list(ACCOUNTS)),
    "active": (["--active"], [e for e in ACCOUNTS if not e.startswith("carl")]),
    "disabled": (["--disabled"], ["carl@example.com"]),
    "e-mail contains, any case": (
        ["--email-contains", "EXAMPLE.COM"],
        ["Ana@Example.com", "carl@example.com"],
    ),
    "e-mail contains _": (["--email-contains", "a_x"], ["dora_x@example.net"]),
    "e-mail contains %": (["--email-contains", "%"], ["100%sure@example.net"]),
    "filters combine": (["--email-contains", "example.com", "--active"], ["Ana@Example.com"]),
    "nothing matches": (["--email-contains", "nobody"], []),
}


@pytest.mark.parametrize(("args", "expected"), FILTERS.values(), ids=FILTERS.keys())
async def test_each_filter_narrows_the_users_in_creation_order(
    args, expected, database_url, runtime
):
    await register_accounts(runtime)
    result = await cli("users", "list", *args, "--format", "csv", database_url=database_url)
    assert csv_column(result, "email") == expected
    assert result.stderr == ""


async def test_the_table_shows_useful_columns_and_never_a_password_hash(database_url, runtime):
    await register_accounts(runtime)
    result = await cli("users", "list", database_url=database_url)
    assert_succeeded(result)
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "e-mail" in line)
    for title in ("id", "first name", "phone", "controllers", "created (UTC)", "disabled (UTC)"):
        assert title in header
    [ana] = [line for line in lines if "Ana@Example.com" in line]
    assert "+359 2 123" in ana
    assert " 2 " in ana  # owns two controllers
    [carl] = [line for line in lines if "carl@example.com" in line]
    assert len(TIMESTAMP.findall(ana)) == 1  # created
    assert len(TIMESTAMP.findall(carl)) == 2  # created and disabled
    for account in await rows(runtime, users):
        assert account.password_hash not in result.stdout
    assert "$argon2" not in result.stdout


async def test_limit_shows_the_first_users_and_says_how_many_more_match(database_url, runtime):
    await register_accounts(runtime)
    result = await cli("users", "list", "--limit", "2", "--format", "json",
                       database_url=database_url)  # fmt: skip
    assert_succeeded(result)
    listed = json.loads(result.stdout)
    assert [u["email"] for u in listed] == ["Ana@Example.com", "ben@example.org"]
    assert listed[0]["controllers"] == 2 and listed[0]["disabled_at"] is None
    assert "password_hash" not in listed[0]
    assert result.stderr.strip() == (
        "2 of 6 users shown; 4 more: raise --limit or narrow the filters"
    )


BAD_FILTERS = {
    "empty search": (["--email-contains", ""], "email_contains: must not be empty"),
    "blank search": (["--email-contains", "  "], "email_contains: must not be empty"),
    "control character": (["--email-contains", "a\x01b"], "control characters"),
    "search too long": (["--email-contains", "a" * 255], "at most 254"),
    "limit zero": (["--limit", "0"], "--limit"),
    "limit not a number": (["--limit", "ten"], "--limit"),
}


@pytest.mark.parametrize(("args", "fragment"), BAD_FILTERS.values(), ids=BAD_FILTERS.keys())
async def test_a_bad_filter_value_fails_in_one_line(args, fragment, database_url):
    result = await cli("users", "list", *args, database_url=database_url)
    assert_one_line_error(result, fragment)

"""The web app's session rules, in-process, on SQLite and PostgreSQL: the cookie, its
digest, the proof every change needs, what ends a session, the throttles of log-in."""

from __future__ import annotations

import hashlib
import ipaddress
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from devicecontrol.auth.sessions import COOKIE_NAME, TLS_COOKIE_NAME
from devicecontrol.clock import utcnow
from devicecontrol.config import Settings, ThrottleRule
from devicecontrol.database.tables import web_sessions
from devicecontrol.events import slots
from devicecontrol.events.opening import SessionCredential
from devicecontrol.events.slots import STREAMS_PER_USER
from devicecontrol.housekeeping.purge import purge
from devicecontrol.users import service as users
from tests.asgi import app_and_client
from tests.factories import PASSWORD, make_controller, make_user
from tests.webapp.support import HTMX, changed_with, log_in, session_cookie_attributes

ANA, BEN = "ana@example.com", "ben@example.com"


async def test_the_cookie_is_httponly_strict_for_the_whole_site_and_stored_as_a_digest(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        answer = await http.post(
            "/app/login", data={"username": ANA, "password": PASSWORD}, headers=HTMX
        )
        assert answer.status_code == 200, answer.text
        cookie = session_cookie_attributes(answer)
        assert cookie["httponly"] is True and str(cookie["samesite"]).lower() == "strict"
        assert cookie["path"] == "/" and "secure" not in cookie  # plain HTTP here
        async with runtime.database.read() as connection:
            stored = (await connection.execute(select(web_sessions))).all()
        assert [row.digest for row in stored] == [
            hashlib.sha256(str(cookie["value"]).encode()).hexdigest()
        ]
        assert str(cookie["value"]) not in repr(stored)


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_the_cookie_is_secure_over_tls_directly_or_through_a_trusted_proxy(settings):
    proxy = Settings(
        database_url=settings.database_url,
        trusted_proxies=(ipaddress.ip_network("10.0.0.0/8"),),
    )
    form = {"username": ANA, "password": PASSWORD}
    async with app_and_client(proxy, peer="10.0.0.2") as (runtime, http):
        await make_user(runtime, ANA)
        answer = await http.post(
            "/app/login", data=form, headers={**HTMX, "X-Forwarded-Proto": "https"}
        )
        assert session_cookie_attributes(answer)["secure"] is True
        answer = await http.post("/app/login", data=form, headers=HTMX)
        assert "secure" not in session_cookie_attributes(answer)
    # the same header from a peer that is no trusted proxy is not believed
    async with app_and_client(proxy, peer="192.0.2.7") as (runtime, http):
        answer = await http.post(
            "/app/login", data=form, headers={**HTMX, "X-Forwarded-Proto": "https"}
        )
        assert "secure" not in session_cookie_attributes(answer)
    async with app_and_client(proxy) as (runtime, http):
        http.base_url = "https://testserver"
        answer = await http.post("/app/login", data=form, headers=HTMX)
        cookie = session_cookie_attributes(answer)
        assert cookie["secure"] is True and cookie["name"] == TLS_COOKIE_NAME
        assert cookie["path"] == "/" and "domain" not in cookie  # what __Host- requires


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_over_tls_only_the_host_prefixed_cookie_is_a_session(settings):
    """A cookie under the plain name, which a neighbouring subdomain or a page over plain
    HTTP could have planted, is no session over TLS; the __Host- one is."""
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        http.base_url = "https://testserver"
        await log_in(http, ANA)
        secret = http.cookies[TLS_COOKIE_NAME]
        http.cookies.clear()
        owned = await http.get("/app/", headers={"Cookie": f"{TLS_COOKIE_NAME}={secret}"})
        assert owned.status_code == 200 and "Log out" in owned.text
        planted = await http.get("/app/", headers={"Cookie": f"{COOKIE_NAME}={secret}"})
        assert planted.status_code in (302, 303) and planted.headers["location"].startswith(
            "/app/login"
        )
        stream = await http.get(
            "/v1/controllers/events", headers={"Cookie": f"{COOKIE_NAME}={secret}"}
        )
        assert stream.status_code == 401


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_two_session_cookies_are_no_session_on_pages_and_streams_alike(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await log_in(http, ANA)
        secret = http.cookies[COOKIE_NAME]
        http.cookies.clear()
        other = "0" * len(secret)
        for cookies in (f"{COOKIE_NAME}={secret}; {COOKIE_NAME}={other}",
                        f"{COOKIE_NAME}={other}; {COOKIE_NAME}={secret}"):  # fmt: skip
            page = await http.get("/app/", headers={"Cookie": cookies})
            assert page.status_code in (302, 303), page.text
            stream = await http.get("/v1/controllers/events", headers={"Cookie": cookies})
            assert stream.status_code == 401
        alone = await http.get("/app/", headers={"Cookie": f"{COOKIE_NAME}={secret}"})
        assert alone.status_code == 200


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_a_cookie_stream_past_the_users_limit_is_429_with_retry_after(settings):
    """The eleventh tab: the session's stream is refused as a bearer's is, 429, never 401
    (which sent the page through the log-in again and again)."""
    async with app_and_client(settings) as (runtime, http):
        user_id = await make_user(runtime, ANA)
        await log_in(http, ANA)
        for _ in range(STREAMS_PER_USER):
            await slots.take(runtime, user_id)
        answer = await http.get("/v1/controllers/events")
        assert answer.status_code == 429, answer.text
        assert int(answer.headers["retry-after"]) >= 1
        assert answer.headers["content-type"].startswith("application/problem+json")


async def test_a_change_without_the_sessions_token_is_refused_in_words(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_controller(runtime, "FREE-1")
        token = await log_in(http, ANA)
        claim = {"serial_number": "FREE-1"}
        refusals = [
            HTMX,  # the cookie alone
            changed_with("0" * 64),  # a token, not this session's
            {**changed_with(token), "Origin": "http://foreign.example"},
            {**changed_with(token), "Sec-Fetch-Site": "cross-site"},
            {**changed_with(token), "Origin": "null"},
        ]
        for headers in refusals:
            answer = await http.post("/app/claim", data=claim, headers=headers)
            assert answer.status_code == 403, (headers, answer.text)
            assert "did not come from this app" in answer.text
            assert answer.headers["content-type"].startswith("text/html")
        assert "FREE-1" not in (await http.get("/app/")).text
        # our own host, on whatever port the browser used (a proxy passes Host without it)
        own_origin = {**changed_with(token), "Origin": "http://testserver:8443"}
        answer = await http.post("/app/claim", data=claim, headers=own_origin)
        assert answer.status_code == 200, answer.text
        assert 'data-serial="FREE-1"' in answer.text


async def test_a_log_in_form_posted_from_another_origin_is_refused(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        form = {"username": ANA, "password": PASSWORD}
        for headers in ({}, {**HTMX, "Origin": "http://foreign.example"}):
            answer = await http.post("/app/login", data=form, headers=headers)
            assert answer.status_code == 403, answer.text
            assert COOKIE_NAME not in answer.headers.get("set-cookie", "")


async def test_log_out_a_password_change_tokens_revoke_and_disable_end_a_session_at_once(
    settings,
):
    """Four accounts, each logged in; each way of ending a session, then its cookie
    replayed: a page sends it to the log-in, a change is not made."""
    ends = {
        "log out": None,
        "set password": lambda runtime, user: users.set_password(
            runtime, user, password="another correct horse"
        ),
        "tokens revoke": users.revoke_user_tokens,
        "disable": users.disable_user,
    }
    async with app_and_client(settings) as (runtime, http):
        for number, (end, ending) in enumerate(ends.items()):
            user = f"user{number}@example.com"
            await make_user(runtime, user)
            http.cookies.clear()
            token = await log_in(http, user)
            cookie = http.cookies[COOKIE_NAME]
            if ending is None:
                answer = await http.post("/app/logout", headers=changed_with(token))
                assert answer.headers["hx-redirect"] == "/app/login"
                assert session_cookie_attributes(answer)["max-age"] == "0"
            else:
                await ending(runtime, user)
            http.cookies.clear()
            http.cookies[COOKIE_NAME] = cookie  # replayed
            answer = await http.get("/app/")
            assert (answer.status_code, answer.headers["location"]) == (303, "/app/login"), end
            answer = await http.post(
                "/app/claim", data={"serial_number": "X"}, headers=changed_with(token)
            )
            assert answer.headers.get("hx-redirect") == "/app/login", end


async def test_log_in_is_throttled_by_the_token_endpoints_rules_and_says_so(settings):
    strict = Settings(
        database_url=settings.database_url, throttle_login_per_username=ThrottleRule(2, 900)
    )
    async with app_and_client(strict) as (runtime, http):
        await make_user(runtime, ANA)
        wrong = {"username": ANA, "password": "wrong horse"}
        for _ in range(2):
            answer = await http.post("/app/login", data=wrong, headers=HTMX)
            assert answer.status_code == 400
            assert "Wrong username or password." in answer.text
            assert 'role="alert"' in answer.text
        answer = await http.post("/app/login", data={**wrong, "password": PASSWORD}, headers=HTMX)
        assert answer.status_code == 429
        assert answer.headers["retry-after"]
        assert f"try again in {answer.headers['retry-after']} seconds" in answer.text
        assert COOKIE_NAME not in answer.headers.get("set-cookie", "")


async def test_the_purge_deletes_expired_sessions_and_keeps_live_ones(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await log_in(http, ANA)
        await purge(runtime.database, runtime.settings)
        assert await session_rows(runtime) == 1  # live: kept
        past_expiry = utcnow() + timedelta(seconds=runtime.settings.access_token_ttl + 1)
        await purge(runtime.database, runtime.settings, now=past_expiry)
        assert await session_rows(runtime) == 0


async def session_rows(runtime) -> int:
    async with runtime.database.read() as connection:
        return (await connection.execute(select(func.count()).select_from(web_sessions))).scalar()


async def test_a_stream_opened_by_the_session_holds_until_the_session_ends(settings):
    """What a stream checks every 10 s while it runs (events/opening.py): the session's
    expiry, and None once it ended, which closes the stream."""
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        token = await log_in(http, ANA)
        credential = SessionCredential(http.cookies[COOKIE_NAME])
        expires_at = await credential.expires_at(runtime)
        assert expires_at is not None and expires_at > utcnow()
        await http.post("/app/logout", headers=changed_with(token))
        assert await credential.expires_at(runtime) is None

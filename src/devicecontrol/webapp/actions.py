"""What the app changes (POST): log-in and log-out, claim, hand-over, release. Each calls
the service the API's route calls, with the same rules; each needs the app's proof."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Request, Response, post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Template

from devicecontrol.auth.sessions import WebSession, end_session, start_session
from devicecontrol.controllers import service as controllers
from devicecontrol.devices.commands import service as commands
from devicecontrol.errors import NotFound
from devicecontrol.http.addresses import client_address
from devicecontrol.runtime import Runtime
from devicecontrol.webapp.activity import latest_commands
from devicecontrol.webapp.controls import sent_fields
from devicecontrol.webapp.failures import LOGIN_PATH
from devicecontrol.webapp.pages import APP_HOME, page
from devicecontrol.webapp.proof import require_login_proof
from devicecontrol.webapp.shown import controller_rows
from devicecontrol.webapp.viewer import session_cookie
from devicecontrol.webapp.wording import words, words_or

Form = Body(media_type=RequestEncodingType.URL_ENCODED)


@dataclass
class LoginForm:
    username: str = ""
    password: str = ""


@dataclass
class ClaimForm:
    serial_number: str = ""
    claim_code: str = ""


@dataclass
class HandOverForm:
    owner: str = ""


def go_to(path: str, *, cookie: Any = None) -> Response[bytes]:
    """An answer htmx follows with a full page load (the new page opens its own stream)."""
    return Response(
        b"", status_code=200, headers={"HX-Redirect": path}, cookies=[cookie] if cookie else []
    )


@post("/app/login", include_in_schema=False, status_code=200)
async def log_in(
    request: Request[Any, Any, Any],
    runtime: NamedDependency[Runtime],
    data: Annotated[LoginForm, Form],
) -> Response[bytes]:
    """The token endpoint's password check and throttles; a session instead of tokens."""
    require_login_proof(request)
    session = await start_session(
        runtime,
        username=data.username,
        password=data.password,
        client_address=client_address(request, runtime.settings.trusted_proxies),
    )
    return go_to(APP_HOME, cookie=session_cookie(request, runtime, session))


@post("/app/logout", include_in_schema=False, status_code=200)
async def log_out(
    request: Request[Any, Any, Any],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
) -> Response[bytes]:
    await end_session(runtime, viewer.secret)
    return go_to(LOGIN_PATH, cookie=session_cookie(request, runtime, None))


@post("/app/claim", include_in_schema=False, status_code=200)
async def claim(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    data: Annotated[ClaimForm, Form],
) -> Template:
    """The API's assign; the answer is a message and the list's rows, refreshed. A claim
    of one's own controller changes nothing (the API's assign is idempotent) and says so."""
    serial = data.serial_number.strip()
    owned_already = await _owns(runtime, viewer.user_id, serial)
    await controllers.assign_controller(
        runtime, viewer.user_id, serial, claim_code=data.claim_code or None
    )
    rows, _ = await controller_rows(runtime, viewer.user_id)
    message = words("claim.already" if owned_already else "claim.done", serial=serial)
    return page("_claimed.html", viewer, message=message, alert=False, rows=rows, oob=True)


async def _owns(runtime: Runtime, user_id: int, serial: str) -> bool:
    try:
        await controllers.get_controller(runtime, user_id, serial)
    except NotFound:
        return False
    return True


@post("/app/controllers/{serial_number:str}/handover", include_in_schema=False, status_code=200)
async def hand_over(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    data: Annotated[HandOverForm, Form],
) -> Response[bytes]:
    await controllers.reassign_controller(
        runtime, viewer.user_id, serial_number, new_owner=data.owner.strip()
    )
    return go_to(APP_HOME)


@post("/app/controllers/{serial_number:str}/release", include_in_schema=False, status_code=200)
async def release(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
) -> Response[bytes]:
    await controllers.release_controller(runtime, viewer.user_id, serial_number)
    return go_to(APP_HOME)


@post("/app/controllers/{serial_number:str}/commands", include_in_schema=False, status_code=200)
async def send_command(
    request: Request[Any, Any, Any],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
) -> Template:
    """The API's native command (checked strictly by the catalogue, the default time to
    live); the answer is a message and the commands' rows, whose statuses then change live."""
    form = {name: str(value) for name, value in (await request.form()).items()}
    name = form.pop("name", "")
    device = await commands.owned_device(runtime, viewer.user_id, serial_number)
    await commands.create_command(
        runtime,
        device,
        name=name,
        fields=sent_fields(device.type, name, form),
        ttl_s=runtime.settings.command_ttl_s,
        strict=True,
    )
    return page(
        "_command_sent.html",
        viewer,
        message=words("command.sent", name=words_or(f"command.{name}", name)),
        alert=False,
        commands=await latest_commands(runtime, device),
        oob=True,
    )


ACTIONS = [log_in, log_out, claim, hand_over, release, send_command]

"""The OpenAPI document: what Litestar generates from the handlers, plus what it cannot see.

Litestar builds paths, parameters and the HAL success bodies from the handlers' signatures
and their msgspec return types. The handlers declare the rest with the helpers here:

- ``problems(...)`` (``responses=``): the problem+json errors an endpoint can answer;
- ``ApiOperation`` / ``TokenOperation`` and ``with_body(...)`` (``operation_class=``): the
  headers those errors carry (``WWW-Authenticate``, ``Retry-After``, the token endpoints'
  no-store pair; ``X-Request-ID`` on every response) and, for handlers that read their
  body themselves (``bodies.py``), the request body, generated from the msgspec Struct
  that documents it and decodes it (``fields.py``);
- ``BEARER`` / ``CLIENT_CREDENTIALS`` (``security=``) and ``SECURITY_SCHEMES``.

``served_document`` is what ``GET /openapi.json`` and ``GET /docs/openapi.json`` answer:
Litestar's document with the paging bounds of this app's settings filled in. ``SwaggerPage``
is ``GET /docs``: Swagger UI, which loads ``/docs/openapi.json`` instead of carrying the
document inline (Litestar's page does), so the page stays a few KB and the document cacheable.
"""

from __future__ import annotations

import html
import inspect
from dataclasses import dataclass
from http import HTTPStatus
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from litestar import Litestar, Request, get
from litestar.datastructures import ResponseHeader
from litestar.enums import OpenAPIMediaType as DocumentMediaType
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import (
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
    SecurityRequirement,
    SecurityScheme,
)

from devicecontrol.errors import PROBLEM_MEDIA_TYPE, REALM, FieldError
from devicecontrol.http.bodies import FORM, JSON
from devicecontrol.observability.request_log import REQUEST_ID_PATTERN

OPENAPI_JSON = DocumentMediaType.OPENAPI_JSON.value
BASIC_CHALLENGE = 'Basic realm="devicecontrol"'

BEARER_SCHEME = "bearerToken"
CLIENT_BASIC_SCHEME = "clientBasic"
SECURITY_SCHEMES = {
    BEARER_SCHEME: SecurityScheme(
        type="http",
        scheme="bearer",
        description="An access token from POST /v1/auth/login or /v1/auth/renew "
        "(40 lowercase hex characters).",
    ),
    CLIENT_BASIC_SCHEME: SecurityScheme(
        type="http",
        scheme="basic",
        description="Client credentials (RFC 6749 §2.3.1): client_id and client_secret as HTTP "
        "Basic, instead of the body fields. Basic wins when both are sent.",
    ),
}
BEARER: list[SecurityRequirement] = [{BEARER_SCHEME: []}]
# the client authenticates with body fields (no security scheme) or with HTTP Basic
CLIENT_CREDENTIALS: list[SecurityRequirement] = [{CLIENT_BASIC_SCHEME: []}, {}]


# ---------------------------------------------------------------------------------------
# errors


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """RFC 9457 problem details: the body of every error (problems.problem_response)."""

    type: Literal["about:blank"]
    title: str
    status: Annotated[int, msgspec.Meta(ge=400, le=599)]
    detail: str
    errors: list[FieldError] | msgspec.UnsetType = msgspec.UNSET


class OAuthProblem(Problem, frozen=True, kw_only=True):
    """An RFC 6749 §5.2 error of the token endpoints: ``title`` and ``error`` hold the code."""

    error: Literal["invalid_request", "invalid_client", "invalid_grant"]


_DESCRIPTIONS = {
    400: "A malformed request: a bad body, field or query parameter; `errors` names the fields.",
    401: 'No bearer access token (`WWW-Authenticate: Bearer realm="devicecontrol"`), or an '
    'unknown, expired or revoked one (`…, error="invalid_token"`).',
    403: "The controller needs its claim code, and the body has none or a wrong one.",
    404: "No such controller among the caller's: unknown, another account's, or a serial "
    "number that is not well-formed (the same answer for all three).",
    409: "The controller belongs to another account (or changed hands meanwhile).",
    413: "The request body is over 64 KiB.",
    415: "A non-empty request body of a media type this endpoint does not take.",
    422: "The new owner is not an active account.",
    429: "Too many failures; try again after `Retry-After` seconds.",
    503: "The database cannot be reached; try again after `Retry-After` seconds.",
}
_OAUTH_DESCRIPTIONS = {
    400: "`invalid_request` (a missing or malformed field, or a malformed body) or "
    "`invalid_grant` (wrong credentials or token).",
    401: "`invalid_client`: unknown client, wrong client secret or malformed HTTP Basic "
    'credentials (`WWW-Authenticate: Basic realm="devicecontrol"`).',
}


def problems(
    *statuses: int, oauth: bool = False, descriptions: dict[int, str] | None = None
) -> dict[int, ResponseSpec]:
    """The problem+json responses of the given statuses, for a handler's ``responses=``.

    With ``oauth``, 400 and 401 are RFC 6749 errors (the token endpoints). ``descriptions``
    replaces the usual text of a status where this endpoint answers it for other reasons.
    """
    specs = {}
    for status in statuses:
        oauth_error = oauth and status in _OAUTH_DESCRIPTIONS
        description = (descriptions or {}).get(status) or (
            _OAUTH_DESCRIPTIONS if oauth_error else _DESCRIPTIONS
        ).get(status, HTTPStatus(status).phrase)
        specs[status] = ResponseSpec(
            data_container=OAuthProblem if oauth_error else Problem,
            media_type=PROBLEM_MEDIA_TYPE,
            description=description,
            generate_examples=False,
        )
    return specs


# ---------------------------------------------------------------------------------------
# operations: response headers and request bodies


def _header(description: str, schema: Schema) -> OpenAPIHeader:
    return OpenAPIHeader(schema=schema, required=True, description=description)


_RETRY_AFTER = _header(
    "Seconds until a new attempt can succeed.", Schema(type=OpenAPIType.INTEGER, minimum=1)
)
_REQUEST_ID = _header(
    "The request's id, on every log line about it: the client's `X-Request-ID` when it "
    "matches this pattern, else a new one.",
    Schema(type=OpenAPIType.STRING, pattern=REQUEST_ID_PATTERN),
)
_NO_STORE = {
    "Cache-Control": _header(
        "Token responses are never stored.", Schema(type=OpenAPIType.STRING, const="no-store")
    ),
    "Pragma": _header(
        "Token responses are never cached.", Schema(type=OpenAPIType.STRING, const="no-cache")
    ),
}


def _struct_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of a flat msgspec Struct, inline (it names no other component)."""
    _, components = msgspec.json.schema_components([struct])
    if list(components) != [struct.__name__]:
        raise TypeError(f"{struct.__name__} must be a flat Struct to be documented inline")
    schema: dict[str, Any] = components[struct.__name__]
    if "description" in schema:
        schema["description"] = inspect.cleandoc(schema["description"])
    return schema


@dataclass
class ApiOperation(Operation):
    """An operation of this API: its documented error responses carry their headers.

    Subclasses made by ``with_body`` also document the request body that the handler reads
    itself (Litestar only sees bodies that arrive as a ``data`` parameter).
    """

    challenge: ClassVar[Schema] = Schema(
        type=OpenAPIType.STRING,
        pattern=f'^{REALM}(, error="invalid_token")?$',  # REALM holds no regex syntax
    )
    no_store: ClassVar[bool] = False
    body: ClassVar[type[msgspec.Struct] | None] = None
    body_media_types: ClassVar[tuple[str, ...]] = (JSON,)
    body_required: ClassVar[bool] = True

    def __post_init__(self) -> None:
        responses = self.responses or {}
        for status, response in list(responses.items()):
            if not isinstance(response, OpenAPIResponse):
                continue
            if int(status) >= 400 and PROBLEM_MEDIA_TYPE not in (response.content or {}):
                # Litestar's generic 400 (application/json) for any handler with parameters:
                # this API's errors are problem+json, and handlers declare theirs (problems())
                del responses[status]
                continue
            self._add_headers(int(status), response)
        if self.body is not None:
            schema = _struct_schema(self.body)
            # a form field is a string, sent once (bodies._decode_form); JSON extras are ignored
            form_schema = {**schema, "additionalProperties": {"type": "string"}}
            self.request_body = RequestBody(
                content={
                    media_type: OpenAPIMediaType(
                        schema=form_schema if media_type == FORM else schema  # type: ignore[arg-type]
                    )
                    for media_type in self.body_media_types
                },
                required=self.body_required,
                description=schema.get("description"),
            )

    def _add_headers(self, status: int, response: OpenAPIResponse) -> None:
        headers = dict(response.headers or {})
        headers["X-Request-ID"] = _REQUEST_ID  # every answer (observability/request_log.py)
        if status == 401:
            headers["WWW-Authenticate"] = _header("The authentication challenge.", self.challenge)
        if status in (429, 503):
            headers["Retry-After"] = _RETRY_AFTER
        if self.no_store:
            headers.update(_NO_STORE)
        response.headers = headers or None


@dataclass
class TokenOperation(ApiOperation):
    """A token endpoint: client authentication failures challenge Basic; nothing is stored."""

    challenge: ClassVar[Schema] = Schema(type=OpenAPIType.STRING, const=BASIC_CHALLENGE)
    no_store: ClassVar[bool] = True
    body_media_types: ClassVar[tuple[str, ...]] = (JSON, FORM)


def location(description: str, *, required: bool = True) -> list[ResponseHeader]:
    """The documented ``Location`` of a 201 (``hal.created``); ``description`` says what it
    is the path of."""
    return [
        ResponseHeader(
            name="Location",
            description=description,
            documentation_only=True,
            required=required,
        )
    ]


class CsvToo(ApiOperation):
    """An operation whose success can also be CSV (``Accept: text/csv``), streamed."""

    def __post_init__(self) -> None:
        super().__post_init__()
        success = (self.responses or {}).get("200")
        if isinstance(success, OpenAPIResponse):
            success.content = {
                **(success.content or {}),
                "text/csv": OpenAPIMediaType(
                    schema=Schema(
                        type=OpenAPIType.STRING,
                        description="A header row (`created`, then every field), then "
                        "one row per reading, oldest first.",
                    )
                ),
            }


def with_body(
    base: type[ApiOperation], body: type[msgspec.Struct], *, required: bool = True
) -> type[ApiOperation]:
    """``base`` documenting ``body`` (a flat Struct) as the request body of the operation."""
    return type(f"{body.__name__}Operation", (base,), {"body": body, "body_required": required})


# ---------------------------------------------------------------------------------------
# the served document


def _finish(document: dict[str, Any], *, default_page_size: int, max_page_size: int) -> None:
    """Fill in what depends on this app's settings: the bounds of every ``page_size``."""
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                if parameter.get("in") == "query" and parameter.get("name") == "page_size":
                    parameter["schema"] = {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": max_page_size,
                        "default": default_page_size,
                    }
                    parameter["description"] = f"Items per page, 1 to {max_page_size}."


def served_document(app: Litestar) -> bytes:
    """The document as served, JSON-encoded; built on first use, once per app."""
    cached: bytes | None = app.state.get("openapi_document")
    if cached is None:
        document = app.openapi_schema.to_schema()
        settings = app.state.runtime.settings
        _finish(
            document,
            default_page_size=settings.default_page_size,
            max_page_size=settings.max_page_size,
        )
        cached = msgspec.json.encode(document)
        app.state.openapi_document = cached
    return cached


class ServedDocumentPlugin(JsonRenderPlugin):
    """/docs/openapi.json (the document Swagger UI loads) answers the served document too."""

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return served_document(request.app)


class SwaggerPage(SwaggerRenderPlugin):
    """Swagger UI that loads the served document from its URL (``url:``).

    Litestar's own page writes the whole document into the HTML (``spec:``, 150 KB), and
    its document at that, without the paging bounds ``served_document`` fills in.
    """

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        document_url = msgspec.json.encode(self.get_openapi_json_route(request)).decode()
        title = html.escape(openapi_schema["info"]["title"])
        return f"""<!DOCTYPE html>
<html>
  <head>
    <title>{title}</title>
    {self.favicon}
    <meta charset="utf-8"/>
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <link href="{self.css_url}" rel="stylesheet">
    <script src="{self.js_url}" crossorigin></script>
    <script src="{self.standalone_preset_js_url}" crossorigin></script>
    {self.style}
  </head>
  <body>
    <div id="swagger-container"></div>
    <script type="text/javascript">
      const ui = SwaggerUIBundle({{
        url: {document_url},
        dom_id: "#swagger-container",
        deepLinking: true,
        showExtensions: true,
        showCommonExtensions: true,
        presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
      }})
    </script>
  </body>
</html>
""".encode()


@get(
    "/openapi.json",
    media_type=OPENAPI_JSON,
    include_in_schema=False,
    sync_to_thread=False,
    opt={"exclude_from_auth": True},
)
def openapi_json(request: Request[Any, Any, Any]) -> bytes:
    """The OpenAPI document of the v1 API; no token needed."""
    return served_document(request.app)

"""The studio's FastAPI app: ``create_app(store, media=..., static_dir=..., config=...)``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from preflab.store import FeedbackStore
from preflab.studio import (
    routes_answers,
    routes_groupwise,
    routes_owner,
    routes_owner_routing,
    routes_queries,
    routes_session,
    routes_static,
    routes_study,
    routes_study_api,
)
from preflab.studio.auth import FailureThrottle, RateLimiter, TokenCache
from preflab.studio.clips import Prerenderer
from preflab.studio.config import StudioConfig
from preflab.studio.middleware import BodyLimit, SecurityHeaders
from preflab.studio.schemas import tidy
from preflab.studio.study_assign import Assigner

if TYPE_CHECKING:
    from preflab.media import MediaService

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).parent / "static"


def create_app(
    store: FeedbackStore,
    *,
    media: MediaService | None = None,
    static_dir: Path = STATIC_DIR,
    config: StudioConfig = StudioConfig(),  # noqa: B008 (frozen, shared safely)
    run_dir: Path | None = None,
) -> FastAPI:
    """The studio app over ``store``; ``media`` renders clips (None: clips 'unavailable');
    ``run_dir`` (when the store belongs to a run directory) lets the owner's export hold the
    labels the run trained on, as ``preflab export RUN_DIR`` does."""
    # The groupwise view's numerics (DTW, tree, ensemble disagreement) import torch through
    # preflab.reward; imported here so that ``import preflab.studio.app`` stays light.
    from preflab.studio.groupwise_cache import GroupwiseCache

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.groupwise.start()  # builds each new round's tree as soon as it is published
        app.state.prerender.start()  # renders each new round's clips before anyone asks
        yield
        app.state.prerender.close()
        app.state.groupwise.close()

    app = FastAPI(
        lifespan=lifespan,
        title="PrefLab Studio",
        description="Judge agent behaviour while a PrefLab run trains (Contract C).",
        version="1",
        docs_url=None,  # Swagger UI needs inline scripts and a CDN, which the CSP forbids
        redoc_url=None,
    )
    app.state.store = store
    app.state.media = media
    app.state.static_dir = Path(static_dir)
    app.state.config = config
    app.state.run_dir = run_dir
    app.state.token_cache = TokenCache(ttl_s=config.token_cache_s)
    app.state.rate_limiter = RateLimiter(config.rate_per_s, config.rate_burst)
    app.state.auth_throttle = FailureThrottle(config.auth_failures, config.auth_failure_window_s)
    app.state.groupwise = GroupwiseCache(store, media)  # issue #10: built once per round
    app.state.prerender = Prerenderer(store, media)
    app.state.assigner = Assigner()  # a study's overlap assignment and attention checks (#61)
    for module in (
        routes_session,
        routes_queries,
        routes_answers,
        routes_groupwise,
        routes_owner,
        routes_owner_routing,  # a routed run's split (issue 58)
        routes_study,  # the study's pages (issue #61), before the static catch-alls
        routes_study_api,
        routes_static,
    ):
        app.include_router(module.router)
    app.include_router(routes_owner.task_router)  # GET /api/task for every annotator (#25)
    assets = Path(static_dir) / "assets"
    if assets.is_dir():
        app.mount("/assets", StaticFiles(directory=assets), name="assets")
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _crash)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = tidy(default_openapi())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _where(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


WHOLE_BODY = frozenset({"missing", "model_type", "model_attributes_type", "dict_type"})
"""Error types of a body that failed as a whole: empty, or not read as a JSON object (a body's
own checks across fields fail at the same place, with another type)."""


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = []
    for e in exc.errors():
        if e.get("type") == "json_invalid":
            errors.append({"field": "body", "message": "not valid JSON (expected a JSON object)"})
            continue
        if tuple(e.get("loc", ())) == ("body",) and e.get("type") in WHOLE_BODY:
            errors.append({"field": "body", "message": _body_error(request, e)})
            continue
        msg = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
        errors.append({"field": _where(tuple(e.get("loc", ()))), "message": msg})
    return _unprocessable(errors)


def _unprocessable(errors: list[dict[str, str]]) -> JSONResponse:
    """422 in the studio's format (:class:`preflab.studio.schemas.ValidationErrorBody`)."""
    detail = "; ".join(f"{x['field']}: {x['message']}" for x in errors[:5])
    return JSONResponse(
        {
            "detail": f"invalid request: {detail}. See /openapi.json for the expected shape",
            "errors": errors,
        },
        status_code=422,
    )


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this Content-Type as JSON (application/json, +json)."""
    if not content_type:
        return False
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _body_error(request: Request, e: Mapping[str, Any]) -> str:
    """What is wrong with a body that failed as a whole (empty, not read as JSON, not an
    object), and how to send it."""
    where = f"{request.method} {request.url.path}"
    ct = request.headers.get("content-type")
    if _is_json(ct):
        if e.get("type") == "missing":
            return f"the body is empty: {where} takes a JSON object"
        return f"{where} takes a JSON object, not an array, a string or a number"
    got = f"Content-Type {ct[:60]!r}" if ct else "no Content-Type"
    said = "the body is empty" if e.get("type") == "missing" else "the body was not read as JSON"
    return f"{said}: send a JSON object with Content-Type: application/json (got {got})"


PARSE_FAILED = "There was an error parsing the body"
"""FastAPI's 400 detail for a body that is JSON but cannot be read (fastapi.routing)."""


def _unreadable_body(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """A JSON body FastAPI could not read (nested too deeply, a number with too many digits):
    a 422 in the studio's format instead of FastAPI's bare 400."""
    cause = exc.__cause__
    if isinstance(cause, RecursionError):
        why = "it is nested too deeply"
    elif isinstance(cause, ValueError) and "digits" in str(cause):
        why = "it holds a number with too many digits"
    else:
        why = "it could not be read"
    message = (
        f"the body could not be read as JSON ({why}): {request.method} {request.url.path} "
        "takes a JSON object of the documented shape"
    )
    return _unprocessable([{"field": "body", "message": message}])


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400 and exc.detail == PARSE_FAILED:
        return _unreadable_body(request, exc)
    detail = exc.detail
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no such page or endpoint: {request.method} {request.url.path}; see /openapi.json"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}; see /openapi.json"
    return JSONResponse(
        {"detail": detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None)
    )


async def _crash(request: Request, exc: Exception) -> JSONResponse:
    log.exception("studio: %s %s failed", request.method, request.url.path)
    return JSONResponse(
        {"detail": "internal error in the studio; see its log (the request was not stored)"},
        status_code=500,
    )

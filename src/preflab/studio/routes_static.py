"""The built front end (public) and rendered clips (signed-in only, by content key)."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from preflab.records import Annotator
from preflab.studio.auth import current_annotator
from preflab.studio.schemas import errors

router = APIRouter()
CLIP_RE = re.compile(r"^([0-9a-f]{32})\.mp4$")

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>PrefLab Studio</title></head>
<body><h1>PrefLab Studio</h1>
<p>The studio front end is not built: run <code>bash scripts/setup.sh</code>
(it builds <code>src/preflab/studio/static/</code>), then restart <code>preflab studio</code>.</p>
<p>The API is up: see <a href="/openapi.json">/openapi.json</a>.</p>
</body></html>
"""


_HTML: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The studio page.",
        "content": {"text/html": {"schema": {"type": "string"}}},
    }
}


@router.get("/", response_class=HTMLResponse, responses=_HTML)
@router.get("/index.html", response_class=HTMLResponse, responses=_HTML)
def index(request: Request) -> Response:
    """The studio's single page (a note on how to build it when the bundle is missing)."""
    page: Path = request.app.state.static_dir / "index.html"
    if page.is_file():
        return HTMLResponse(
            rooted_page(page.read_text(encoding="utf-8"), request.scope.get("root_path", "")),
            headers={"cache-control": "no-cache"},
        )
    return HTMLResponse(NOT_BUILT)


def rooted_page(text: str, root: str) -> str:
    """The built page served under ``root`` (``preflab studio --root-path``, issue #61): its
    asset links under the root, and the root in ``<meta name="preflab-root">`` for the
    script's API calls (empty at the site's root)."""
    root = root.rstrip("/")
    if root:
        text = text.replace('="/assets/', f'="{html.escape(root)}/assets/')
    meta = f'<meta name="preflab-root" content="{html.escape(root)}">'
    return text.replace("<head>", "<head>" + meta, 1)


@router.get(
    "/favicon.ico",
    response_class=Response,
    responses={
        200: {
            "description": "The icon.",
            "content": {"image/x-icon": {"schema": {"type": "string", "format": "binary"}}},
        },
        204: {"description": "No icon in this bundle."},
    },
)
def favicon(request: Request) -> Response:
    """The site icon, when the bundle has one."""
    icon: Path = request.app.state.static_dir / "favicon.ico"
    if icon.is_file():
        return FileResponse(icon, media_type="image/x-icon")
    return Response(status_code=204)


@router.head("/media/{name}", include_in_schema=False)
@router.get(
    "/media/{name}",
    response_class=FileResponse,
    responses={
        200: {
            "description": "The clip; HTTP range requests are supported (206 Partial Content).",
            "content": {"video/mp4": {"schema": {"type": "string", "format": "binary"}}},
        },
        206: {
            "description": "Part of the clip (Range request).",
            "content": {"video/mp4": {"schema": {"type": "string", "format": "binary"}}},
        },
        **errors(400, 401, 404, 416),
    },
)
def clip(
    request: Request, name: str, me: Annotated[Annotator, Depends(current_annotator)]
) -> Response:
    """An MP4 clip by content key (HTTP range requests supported: bytes=FIRST-LAST, FIRST- or
    -SUFFIX_LENGTH, several separated by commas; HEAD too)."""
    m = CLIP_RE.match(name)
    media = request.app.state.media
    path = None
    if m is not None and media is not None:
        try:
            path = media.path(m.group(1))
        except Exception:
            path = None
    if path is None or not Path(path).is_file():
        raise HTTPException(
            404,
            "no rendered clip under this name; clip URLs are /media/<32 hex>.mp4 as given by "
            "the API (poll GET /api/media/KEY until its status is 'ready')",
        )
    stat = os.stat(path)
    refused = _checked_range(request, stat.st_size)
    if refused is not None:
        return refused
    return FileResponse(
        path,
        media_type="video/mp4",
        headers={"cache-control": "private, max-age=86400"},
        stat_result=stat,
    )


# ----- Range requests (RFC 9110 §14): refusals in the studio's JSON format ---------------------
RANGE_SPEC = re.compile(r"([0-9]*)-([0-9]*)")
RANGE_DIGITS = 18
"""Longer byte positions are past the end of any clip (and never parsed as numbers)."""


class RangeError(Exception):
    """A Range header the clip cannot be served by: its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _checked_range(request: Request, size: int) -> Response | None:
    """None when the clip can be served: the request's Range header (if any) is rewritten to
    the satisfiable ranges it asks for, each FIRST-LAST within the clip (the file response
    serves those), or dropped when its unit is not bytes (ignored, as RFC 9110 says). Otherwise
    the JSON refusal: 400 for a malformed header, 416 with ``Content-Range: bytes */SIZE``
    when every range starts past the end."""
    header = request.headers.get("range")
    if header is None:
        return None
    try:
        ranges = byte_ranges(header, size)
    except RangeError as exc:
        extra = {"content-range": f"bytes */{size}"} if exc.status == 416 else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=extra)
    kept = [(k, v) for k, v in request.scope["headers"] if k != b"range"]
    if ranges is not None:
        kept.append((b"range", ("bytes=" + ",".join(f"{a}-{b}" for a, b in ranges)).encode()))
    request.scope["headers"] = kept
    return None


def byte_ranges(header: str, size: int) -> list[tuple[int, int]] | None:
    """The satisfiable ranges of a Range header as (first, last) byte positions within a file
    of ``size`` bytes, in the order asked; None when the unit is not bytes (RFC 9110: ignore
    the header). Raises :class:`RangeError`: 400 when the header is malformed, 416 when no
    range starts before the end."""
    shown = header[:60] + ("…" if len(header) > 60 else "")
    unit, eq, spec = header.partition("=")
    if not eq:
        raise RangeError(400, _malformed(shown, "it has no '='"))
    if unit.strip().lower() != "bytes":
        return None
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise RangeError(400, _malformed(shown, "it names no range"))
    out = []
    for part in parts:
        m = RANGE_SPEC.fullmatch(part)
        if m is None or m.group() == "-":
            raise RangeError(400, _malformed(shown, f"{part[:30]!r} is not FIRST-LAST"))
        first, last = (_position(g) for g in m.groups())
        if first is None:  # -SUFFIX_LENGTH: the last bytes of the file
            if last is not None and last > 0 and size > 0:
                out.append((max(size - last, 0), size - 1))
            continue
        if last is not None and last < first:
            raise RangeError(400, _malformed(shown, f"{part[:30]!r} ends before it starts"))
        if first < size:
            out.append((first, size - 1 if last is None else min(last, size - 1)))
    if not out:
        raise RangeError(
            416,
            f"the Range header {shown!r} asks only for bytes past the end of this clip, which "
            f"has {size} bytes (0 to {size - 1}): ask for ranges that start before byte {size}",
        )
    return out


def _position(digits: str) -> int | None:
    """A byte position's value (None when absent); past any file when it has more digits than
    :data:`RANGE_DIGITS` (RFC 9110 puts no limit on them)."""
    if not digits:
        return None
    return int(digits) if len(digits) <= RANGE_DIGITS else 10**RANGE_DIGITS


def _malformed(shown: str, why: str) -> str:
    return (
        f"the Range header {shown!r} is not valid ({why}): ask for bytes=FIRST-LAST, "
        "bytes=FIRST- or bytes=-SUFFIX_LENGTH in whole numbers with FIRST <= LAST, several "
        "separated by commas, e.g. Range: bytes=0-1023"
    )

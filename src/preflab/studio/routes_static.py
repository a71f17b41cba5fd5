"""The built front end (public) and rendered clips (signed-in only, by content key)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

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
        **errors(401, 404),
    },
)
def clip(
    request: Request, name: str, me: Annotated[Annotator, Depends(current_annotator)]
) -> Response:
    """An MP4 clip by content key (HTTP range requests supported)."""
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
    return FileResponse(
        path, media_type="video/mp4", headers={"cache-control": "private, max-age=86400"}
    )

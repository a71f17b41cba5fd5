"""Who is asking: annotator tokens from ``Authorization: Bearer`` or the HttpOnly cookie.

Only token hashes are stored; a token is checked by looking its SHA-256 up in the store, so no
secret is ever compared byte by byte in Python (no timing side channel on the token).
"""

from __future__ import annotations

from fastapi import HTTPException, Request

from preflab.records import Annotator
from preflab.store import FeedbackStore

COOKIE = "preflab_token"
MAX_TOKEN_LEN = 256
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


def role_of(annotator: Annotator) -> str:
    """'owner' or 'annotator' (from ``meta['role']``)."""
    return "owner" if annotator.meta.get("role") == "owner" else "annotator"


def public(annotator: Annotator) -> dict[str, str]:
    """What the browser may know about an annotator."""
    return {"id": annotator.id, "name": annotator.name, "role": role_of(annotator)}


def _token(request: Request) -> tuple[str | None, bool]:
    """(token, came_from_cookie)."""
    auth = request.headers.get("authorization")
    if auth is not None:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise HTTPException(
                401,
                "the Authorization header must be 'Bearer TOKEN' with your annotator token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return value.strip(), False
    cookie = request.cookies.get(COOKIE)
    return (cookie, True) if cookie else (None, False)


def lookup(store: FeedbackStore, token: str) -> Annotator | None:
    """The annotator holding ``token`` or None (bad-looking tokens never reach the store)."""
    if not token or len(token) > MAX_TOKEN_LEN or not token.isprintable():
        return None
    return store.annotator_by_token(token)


def current_annotator(request: Request) -> Annotator:
    """FastAPI dependency: the authenticated annotator, or 401."""
    token, from_cookie = _token(request)
    if token is None:
        raise HTTPException(
            401,
            "sign in first: open your personal studio link (http://HOST:PORT/#token=...) or send "
            "'Authorization: Bearer TOKEN'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    annotator = lookup(request.app.state.store, token)
    if annotator is None:
        raise HTTPException(
            401,
            "this token is not valid for this studio; ask the run's owner for a new link "
            "(preflab studio add-annotator NAME RUN_DIR)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if from_cookie and request.method not in _SAFE:
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if origin is not None and origin.split("://", 1)[-1] != host:
            raise HTTPException(
                403, f"cross-site request from {origin!r} refused; use the studio page itself"
            )
    return annotator


def owner(request: Request) -> Annotator:
    """FastAPI dependency: the authenticated owner, or 401 / 403."""
    annotator = current_annotator(request)
    if role_of(annotator) != "owner":
        raise HTTPException(
            403,
            "this is for the run's owner only; open the owner link that `preflab studio` prints",
        )
    return annotator

"""Who is asking: annotator tokens from ``Authorization: Bearer`` or the HttpOnly cookie.

Only token hashes are stored; a token is checked by looking its SHA-256 up in the store, so no
secret is ever compared byte by byte in Python (no timing side channel on the token). Valid
tokens are remembered in memory (by hash) for ``StudioConfig.token_cache_s`` seconds.
"""

from __future__ import annotations

import threading
import time

from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from preflab.records import Annotator
from preflab.store import FeedbackStore
from preflab.store.feedback_store import hash_token

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


def plausible(token: str) -> bool:
    return bool(token) and len(token) <= MAX_TOKEN_LEN and token.isprintable()


def lookup(store: FeedbackStore, token: str) -> Annotator | None:
    """The annotator holding ``token`` or None (bad-looking tokens never reach the store)."""
    return store.annotator_by_token(token) if plausible(token) else None


class TokenCache:
    """Recently seen valid tokens (keyed by their hash) → annotator, for ``ttl_s`` seconds, so
    that most requests need no store round trip (and no worker-thread hop) to authenticate."""

    def __init__(self, ttl_s: float = 10.0, max_entries: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._items: dict[str, tuple[float, Annotator]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> Annotator | None:
        with self._lock:
            hit = self._items.get(key)
        if hit is None or hit[0] < time.monotonic():
            return None
        return hit[1]

    def put(self, key: str, annotator: Annotator) -> None:
        with self._lock:
            if len(self._items) >= self.max_entries:
                self._items.clear()
            self._items[key] = (time.monotonic() + self.ttl_s, annotator)


async def _authenticate(request: Request, token: str) -> Annotator | None:
    if not plausible(token):
        return None
    cache: TokenCache = request.app.state.token_cache
    key = hash_token(token)
    annotator = cache.get(key)
    if annotator is None:
        annotator = await run_in_threadpool(request.app.state.store.annotator_by_token, token)
        if annotator is not None:
            cache.put(key, annotator)
    return annotator


async def current_annotator(request: Request) -> Annotator:
    """FastAPI dependency: the authenticated annotator, or 401."""
    token, from_cookie = _token(request)
    if token is None:
        raise HTTPException(
            401,
            "sign in first: open your personal studio link (http://HOST:PORT/#token=...) or send "
            "'Authorization: Bearer TOKEN'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    annotator = await _authenticate(request, token)
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


async def owner(request: Request) -> Annotator:
    """FastAPI dependency: the authenticated owner, or 401 / 403."""
    annotator = await current_annotator(request)
    if role_of(annotator) != "owner":
        raise HTTPException(
            403,
            "this is for the run's owner only; open the owner link that `preflab studio` prints",
        )
    return annotator


# ----- revoking an annotator (issue #25): forget their cached tokens at once --------------------
def forget_annotator(cache: TokenCache, annotator_id: str) -> int:
    """Drop every cached token of ``annotator_id`` from ``cache`` (after the store cleared their
    token hash), so their next request is checked against the store and refused. Returns how
    many entries were dropped. Other worker processes (``--workers N``) hold their own cache,
    which forgets the token within ``token_cache_s``."""
    with cache._lock:
        keys = [k for k, (_exp, a) in cache._items.items() if a.id == annotator_id]
        for k in keys:
            del cache._items[k]
    return len(keys)

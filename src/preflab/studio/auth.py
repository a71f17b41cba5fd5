"""Who is asking: annotator tokens from ``Authorization: Bearer`` or the HttpOnly cookie.

Only token hashes are stored; a token is checked by looking its SHA-256 up in the store, so no
secret is ever compared byte by byte in Python (no timing side channel on the token). Valid
tokens are remembered in memory (by hash) for ``StudioConfig.token_cache_s`` seconds.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import deque

from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from preflab.records import Annotator
from preflab.store import FeedbackStore
from preflab.store.annotators import hash_token

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
    return store.annotators.by_token(token) if plausible(token) else None


class TokenCache:
    """Recently seen valid tokens (keyed by their hash) → annotator, for ``ttl_s`` seconds, so
    that most requests need no store round trip (and no worker-thread hop) to authenticate."""

    def __init__(self, ttl_s: float = 10.0, max_entries: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._items: dict[str, tuple[float, Annotator]] = {}
        self._forgets = 0  # how many times :meth:`forget` ran: a lookup older than one is stale
        self._lock = threading.Lock()

    def get(self, key: str) -> Annotator | None:
        with self._lock:
            hit = self._items.get(key)
        if hit is None or hit[0] < time.monotonic():
            return None
        return hit[1]

    def ticket(self) -> int:
        """Take before looking a token up in the store; :meth:`put` the result with it."""
        with self._lock:
            return self._forgets

    def put(self, key: str, annotator: Annotator, ticket: int) -> None:
        """Remember a store lookup that began at ``ticket`` (:meth:`ticket`), unless a
        :meth:`forget` ran since: the lookup may have read a token revoked meanwhile, and
        remembering it would let that token in again until ``ttl_s`` ran out."""
        with self._lock:
            if ticket != self._forgets:
                return
            if len(self._items) >= self.max_entries:
                self._items.clear()
            self._items[key] = (time.monotonic() + self.ttl_s, annotator)

    def forget(self, annotator_id: str) -> int:
        """Drop every cached token of ``annotator_id`` (after the store cleared their token
        hash), and every lookup still in flight, so their next request is checked against the
        store and refused. Returns how many entries were dropped. Other worker processes
        (``--workers N``) hold their own cache, which forgets the token within ``token_cache_s``."""
        with self._lock:
            self._forgets += 1
            keys = [k for k, (_exp, a) in self._items.items() if a.id == annotator_id]
            for k in keys:
                del self._items[k]
        return len(keys)


async def _authenticate(request: Request, token: str) -> Annotator | None:
    if not plausible(token):
        check_throttle(request)
        failed_sign_in(request)
        return None
    cache: TokenCache = request.app.state.token_cache
    key = hash_token(token)
    annotator = cache.get(key)
    if annotator is None:
        check_throttle(request)  # a wrong-token flood from this address: 429 before any lookup
        ticket = cache.ticket()
        annotator = await run_in_threadpool(request.app.state.store.annotators.by_token, token)
        if annotator is None:
            failed_sign_in(request)
            return None
        cache.put(key, annotator, ticket)
    check_rate(request, key)
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
# ----- abuse limits: per-token request rate and failed sign-ins per client address -----------
def too_many(retry_after_s: float, what: str) -> HTTPException:
    """429 with a ``Retry-After`` header (whole seconds, at least 1)."""
    wait = max(1, math.ceil(retry_after_s))
    return HTTPException(429, f"{what}; try again in {wait} s", headers={"Retry-After": str(wait)})


class RateLimiter:
    """A token bucket per key: ``burst`` requests at once, then ``rate_per_s`` on average."""

    def __init__(self, rate_per_s: float, burst: int, max_keys: int = 10_000) -> None:
        self.rate_per_s = rate_per_s
        self.burst = float(burst)
        self.max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, monotonic time)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Spend one request of ``key``: 0.0 when allowed, else the seconds until one is."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate_per_s)
            if tokens >= 1.0:
                if len(self._buckets) >= self.max_keys and key not in self._buckets:
                    self._buckets.clear()
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate_per_s if self.rate_per_s > 0 else 60.0


class FailureThrottle:
    """Failed sign-ins per client address within a sliding window of ``window_s`` seconds;
    past ``limit`` of them the address must wait until the oldest leaves the window."""

    def __init__(self, limit: int, window_s: float, max_keys: int = 10_000) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_keys = max_keys
        self._fails: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, addr: str, now: float) -> deque[float] | None:
        times = self._fails.get(addr)
        while times and times[0] <= now - self.window_s:
            times.popleft()
        return times

    def retry_after(self, addr: str) -> float:
        """0.0 when ``addr`` may try to sign in, else the seconds it must wait."""
        now = time.monotonic()
        with self._lock:
            times = self._recent(addr, now)
            if not times or len(times) < self.limit:
                return 0.0
            return times[0] + self.window_s - now

    def fail(self, addr: str) -> None:
        now = time.monotonic()
        with self._lock:
            times = self._recent(addr, now)
            if times is None:
                if len(self._fails) >= self.max_keys:
                    self._fails.clear()
                times = self._fails[addr] = deque()
            times.append(now)
            while len(times) > self.limit:
                times.popleft()


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def check_throttle(request: Request) -> None:
    """429 when the client's address sent too many wrong tokens lately."""
    wait = request.app.state.auth_throttle.retry_after(client_address(request))
    if wait > 0:
        raise too_many(wait, "too many wrong tokens from your address")


def failed_sign_in(request: Request) -> None:
    """Count a wrong token from the client's address."""
    request.app.state.auth_throttle.fail(client_address(request))


def check_rate(request: Request, token_hash: str) -> None:
    """429 when this token made more requests than ``StudioConfig.rate_per_s`` allows."""
    wait = request.app.state.rate_limiter.take(token_hash)
    if wait > 0:
        raise too_many(wait, "too many requests with your token")


_TOKEN_IN_TEXT = re.compile(r"(?i)(token=|bearer\s+|\"token\"\s*:\s*\")[^\s&\"'#;,)]+")


def mask_tokens(text: str) -> str:
    """``text`` with every token in a link, Authorization header or JSON body masked."""
    return _TOKEN_IN_TEXT.sub(lambda m: m.group(1) + "***", text)


class TokenMaskFilter(logging.Filter):
    """A logging filter that masks tokens in every record (studio logs never hold one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = mask_tokens(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(mask_tokens(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {
                k: mask_tokens(v) if isinstance(v, str) else v for k, v in record.args.items()
            }
        return True

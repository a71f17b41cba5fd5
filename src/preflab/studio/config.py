"""Settings of the studio server."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class StudioConfig:
    """How the studio app behaves (the CLI builds it from flags)."""

    max_body_bytes: int = 64 * 1024
    """Largest accepted request body; bigger ones get 413."""
    prefetch: int = 3
    """How many queries after the one asked for get their clips rendered ahead (priority 1)."""
    default_fps: int = 30
    """Frames per second reported for clips when no media service tells otherwise."""
    max_ratings_per_batch: int = 2000
    """Most ratings one POST /api/ratings may carry."""
    cookie_secure: bool = False
    """Mark the session cookie Secure (only when the studio is served over HTTPS)."""
    open_query_window: int = 200
    """How many open queries (in selector order) GET /api/queries/next looks through."""
    token_cache_s: float = 10.0
    """How long a checked token is remembered in memory (0 = look every request up)."""
    # ----- process lifecycle and abuse limits (issue #25) -----------------------------------
    instance: str = ""
    """Random id of this studio process, answered by GET /api/instance: the process that
    started the studio checks it to know the studio on the port serves its run."""
    trainer_stale_s: float = 6.0
    """The trainer counts as stopped when its heartbeat is older than this (seconds)."""
    rate_per_s: float = 50.0
    """Requests per second one token may make on average (a token bucket); more get 429."""
    rate_burst: int = 1000
    """Requests one token may make at once before ``rate_per_s`` applies."""
    auth_failures: int = 60
    """Wrong tokens one client address may send within ``auth_failure_window_s`` before its
    sign-in attempts get 429 (people already signed in from there are not affected)."""
    auth_failure_window_s: float = 60.0
    """The window (seconds) over which ``auth_failures`` are counted."""

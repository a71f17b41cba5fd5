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

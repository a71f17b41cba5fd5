"""Settings of the studio server."""

from __future__ import annotations

from dataclasses import dataclass

from preflab.errors import ConfigError


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

    # ----- the question queue (issue #25) -----------------------------------------------------
    repeat_share: float = 0.0
    """Share of the pairs a person answered with a preference that are asked of them once more,
    as a consistency check (0 = no pair is ever asked twice to the same person). The owner's
    GET /api/owner/consistency reports the repeats and how often they agreed."""
    ready_window: int = 8
    """How many of a person's next queries GET /api/queries/next (and /ahead) look through for
    pairs whose clips are already rendered, which go first (1 = the queue's order only)."""
    min_plays: int = 1
    """How many times both clips must have played before the page takes an answer (answer keys
    pressed sooner are ignored with a hint); 0 turns the page's check off."""
    min_answer_s: float = 1.0
    """Seconds after a query was served to a person before the server accepts their answer to
    it (sooner: 409), so a double key press or a script cannot answer a pair unseen."""
    undo_grace_s: float = 10.0
    """Seconds an answer stays undoable: the page offers Undo this long. Give the trainer's
    reader the same grace (``StoreSource(grace_s=...)``), which collects answers only after it."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.repeat_share <= 1.0:
            raise ConfigError(f"repeat_share must be in [0, 1], got {self.repeat_share}")
        if self.min_plays < 0 or self.min_answer_s < 0 or self.undo_grace_s < 0:
            raise ConfigError(
                "min_plays, min_answer_s and undo_grace_s must be ≥ 0, got "
                f"{self.min_plays}, {self.min_answer_s}, {self.undo_grace_s}"
            )

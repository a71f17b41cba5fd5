"""Canonical records: segments, queries, judgements, labels, ratings, annotators.

One label convention everywhere: ``p = P(a ≻ b)`` in [0, 1]; 1 = a preferred, 0 = b preferred,
0.5 = equally good. A skipped / "can't tell" judgement has ``p = None`` and yields no label.
Records are frozen; corrections are new judgements, nothing is overwritten.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from preflab.errors import DataError

STUDIO_CREATED = "studio"
"""``Query.meta['created_by']`` of group queries a person composed in the studio (the loop did
not ask them; :class:`preflab.sources.studio_bridge.StudioBridge` adopts them into the run)."""

SourceKind = Literal["synthetic", "human", "crowd", "llm", "vlm", "scalar", "model"]
SOURCE_KINDS: tuple[str, ...] = ("synthetic", "human", "crowd", "llm", "vlm", "scalar", "model")
"""How a judgement arrived; 'model': the run's own reward model answered a query it was sure
about (a routed answer, :mod:`preflab.sources.routing`)."""


class Row(Protocol):
    """A stored row read by column name: a dict, any ``Mapping[str, Any]`` or a SQLAlchemy
    ``RowMapping`` (whose keys may also be columns, so it is no ``Mapping[str, Any]``)."""

    def __getitem__(self, key: str, /) -> Any: ...


def new_id(prefix: str) -> str:
    """A fresh, URL-safe unique id such as ``q-3f2a...``."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def now() -> float:
    """Wall-clock time in seconds since the epoch (all record times use this)."""
    return time.time()


def check_finite(name: str, arr: np.ndarray) -> None:
    """Raise a DataError if ``arr`` has NaN or infinite entries."""
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise DataError(
            f"{name} has {bad} NaN or infinite value(s); expected finite numbers. "
            "Check the environment's observations/rewards or drop the affected steps."
        )


def as_float32(name: str, value: Any) -> np.ndarray:
    """``value`` as a float32 array; a DataError for non-numeric data or values beyond float32."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists and the like
        raise DataError(f"{name} must be a rectangular array of numbers: {exc}") from exc
    if arr.dtype.kind not in "biuf":
        raise DataError(
            f"{name} must hold real numbers (bool, int or float), got dtype {arr.dtype}; "
            "convert it (e.g. np.asarray(x, dtype=np.float32))"
        )
    if arr.dtype.kind == "f" and arr.size:
        finite = arr[np.isfinite(arr)]
        big = float(np.max(np.abs(finite.astype(np.float64)))) if finite.size else 0.0
        if big > float(np.finfo(np.float32).max):
            raise DataError(
                f"{name} has values beyond float32's range (|x| up to {big:.3g}); rescale them"
            )
    return arr.astype(np.float32, copy=False)


def check_probability(p: float, what: str = "label p") -> float:
    """Validate ``p = P(a ≻ b)`` in [0, 1] and return it as a float."""
    try:
        value = float(p)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{what} must be a number in [0, 1], got {p!r}") from exc
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise DataError(
            f"{what} must lie in [0, 1] (1 = first preferred, 0 = second, 0.5 = equal), "
            f"got {value}. Convert other conventions (e.g. ±1) with preflab.export.feedback converters."
        )
    return value


@dataclass(frozen=True, kw_only=True, eq=False)
class Segment:
    """A slice of a trajectory: the unit people judge. True rewards never leave the server."""

    id: str
    """Stable id (content hash by default), used by queries, labels and the browser."""
    obs: np.ndarray
    """Observations, shape (T, obs_dim), float32; or images (T, C, H, W) uint8 (stacked frames
    are the channels; a sliding frame stack is held as a strided view over its T + C − 1
    frames, see :mod:`preflab.pixels.frames`)."""
    acts: np.ndarray
    """Actions, shape (T, act_dim), float32 (discrete actions are one-hot encoded)."""
    true_rewards: np.ndarray
    """Hidden true per-step rewards, shape (T,); for evaluation and simulated teachers only."""
    env_id: str = ""
    """Environment id the segment was recorded in."""
    episode: int = -1
    """Index of the episode (trajectory) it was cut from, -1 if unknown."""
    start: int = 0
    """Step index within the episode of the segment's first step."""
    round: int = 0
    """Round of the loop in which the segment was collected."""
    states: np.ndarray | None = None
    """Simulator state before each step, shape (T, S), float64, or None when not captured:
    MuJoCo qpos ⧺ qvel, classic-control ``env.unwrapped.state``, grid-world state (see
    :mod:`preflab.media.capture`). Used only to render the segment; not part of the id."""

    def __post_init__(self) -> None:
        obs = _segment_obs(self.id, self.obs)
        acts = as_float32(f"segment {self.id} acts", self.acts)
        rew = as_float32(f"segment {self.id} true_rewards", self.true_rewards)
        if acts.ndim == 1:
            acts = acts[:, None]
        if acts.ndim != 2 or acts.shape[0] != obs.shape[0]:
            raise DataError(
                f"segment {self.id}: acts must have shape (T, act_dim) with T = {obs.shape[0]}, got {acts.shape}"
            )
        if rew.shape != (obs.shape[0],):
            raise DataError(
                f"segment {self.id}: true_rewards must have shape ({obs.shape[0]},), got {rew.shape}"
            )
        if obs.dtype != np.uint8:
            check_finite(f"segment {self.id} obs", obs)
        check_finite(f"segment {self.id} acts", acts)
        check_finite(f"segment {self.id} true_rewards", rew)
        if self.states is not None:
            states = np.asarray(self.states, dtype=np.float64)
            if states.ndim != 2 or states.shape[0] != obs.shape[0]:
                raise DataError(
                    f"segment {self.id}: states must have shape (T, state_dim) with "
                    f"T = {obs.shape[0]} (one simulator state per step), got {states.shape}; "
                    "pass states=None when the environment's state is not captured"
                )
            check_finite(f"segment {self.id} states", states)
            object.__setattr__(self, "states", states)
        object.__setattr__(self, "obs", obs)
        object.__setattr__(self, "acts", acts)
        object.__setattr__(self, "true_rewards", rew)

    @property
    def length(self) -> int:
        """Number of steps T."""
        return int(self.obs.shape[0])

    @property
    def true_return(self) -> float:
        """Undiscounted sum of the hidden true rewards."""
        return float(self.true_rewards.sum())

    @property
    def is_image(self) -> bool:
        """True for image observations (T, C, H, W) uint8."""
        return self.obs.ndim == 4

    @staticmethod
    def content_id(obs: np.ndarray, acts: np.ndarray) -> str:
        """Content-addressed id from the observation and action bytes."""
        h = hashlib.sha256()
        o = np.asarray(obs)
        if o.dtype == np.uint8 and o.ndim == 4:
            # images hash their uint8 bytes step by step: a compacted frame stack's steps are
            # contiguous views, so no (T, C, H, W) copy is made (same digest as the whole)
            for step in o:
                h.update(np.ascontiguousarray(step).data)
        else:
            h.update(np.ascontiguousarray(o, dtype=np.float32).data)
        h.update(np.ascontiguousarray(acts, dtype=np.float32).tobytes())
        return "s-" + h.hexdigest()[:20]


def _segment_obs(segment_id: str, obs: np.ndarray) -> np.ndarray:
    """Flat observations as float32 (T, D); images (T, C, H, W) kept uint8, views kept views."""
    try:
        arr = np.asarray(obs)
    except (ValueError, TypeError) as exc:  # ragged nested lists and the like
        raise DataError(
            f"segment {segment_id} obs must be a rectangular array of numbers: {exc}"
        ) from exc
    if arr.ndim == 4:  # pixels (issue #13)
        if arr.dtype != np.uint8:
            raise DataError(
                f"segment {segment_id}: image observations (T, C, H, W) must be uint8 (0..255), "
                f"got {arr.dtype}; convert with (x * 255).round().astype(np.uint8) or pass "
                "flat (T, obs_dim) float observations"
            )
        if arr.shape[0] == 0:
            raise DataError(f"segment {segment_id}: obs has no steps (T = 0)")
        return arr
    arr = as_float32(f"segment {segment_id} obs", obs)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise DataError(
            f"segment {segment_id}: obs must have shape (T, obs_dim) (flat) or (T, C, H, W) "
            f"uint8 (images) with T ≥ 1, got {arr.shape}"
        )
    return arr


@dataclass(frozen=True, kw_only=True)
class Query:
    """What we ask: a pair (a, b), a group comparison (G1, G2), a ranking of k clips or a
    rating stream. Its kind (:mod:`preflab.kinds`) owns the shape: ``preflab.kinds.kind_of``
    checks it, and the store checks every query it adds."""

    id: str
    """Unique id."""
    kind: str
    """The name of its kind (:func:`preflab.kinds.kind_names`): 'pair' (one segment a side),
    'group' (groups of segments), 'ranking' (k segments in ``a``) or 'rating' (a stream)."""
    a: tuple[str, ...]
    """Segment ids on the first side (one for a pair; the clips of a ranking; the stream's
    segments for a rating)."""
    b: tuple[str, ...] = ()
    """Segment ids on the second side (empty for a ranking and a rating)."""
    round: int = 0
    """Round of the loop that asked it."""
    created_at: float = field(default_factory=now)
    """Time it was asked."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Selector-specific data (e.g. disagreement score); JSON-serialisable."""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise DataError(f"query {self.id}: kind must be a kind's name, got {self.kind!r}")
        object.__setattr__(self, "a", tuple(self.a))
        object.__setattr__(self, "b", tuple(self.b))
        if not self.a:
            raise DataError(f"query {self.id}: side a is empty; a query needs at least one segment")
        if set(self.a) & set(self.b):
            raise DataError(
                f"query {self.id}: segment(s) {sorted(set(self.a) & set(self.b))} are on both sides"
            )

    @staticmethod
    def from_row(row: Row) -> Query:
        """Rebuild from a stored row (store table or export file); extra keys are ignored."""
        return Query(
            id=row["id"],
            kind=row["kind"],
            a=tuple(row["a"]),
            b=tuple(row["b"]),
            round=row["round"],
            created_at=row["created_at"],
            meta=row["meta"],
        )


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """One annotator's raw answer to one query; ``p=None`` means skipped / can't tell."""

    id: str
    """Unique id."""
    query_id: str
    """The query answered."""
    annotator_id: str
    """Stable id of who answered (person, simulated teacher, LLM)."""
    source: SourceKind
    """How it arrived: synthetic, human, crowd, llm, vlm, scalar or model (routing)."""
    p: float | None
    """P(a ≻ b) in [0, 1]; None for skip / can't tell."""
    created_at: float = field(default_factory=now)
    """Time the answer was given."""
    response_time_s: float | None = None
    """Seconds the annotator took, if known."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Provenance extras: prompt/response hash for LLMs, edited groups for the studio, etc."""

    def __post_init__(self) -> None:
        if self.source not in SOURCE_KINDS:
            raise DataError(f"judgement source must be one of {SOURCE_KINDS}, got {self.source!r}")
        if self.p is not None:
            object.__setattr__(self, "p", check_probability(self.p, f"judgement {self.id} p"))
        if self.response_time_s is not None and not self.response_time_s >= 0:
            raise DataError(
                f"judgement {self.id}: response_time_s must be ≥ 0, got {self.response_time_s}"
            )

    @staticmethod
    def from_row(row: Row) -> Judgement:
        """Rebuild from a stored row (store table or export file); extra keys are ignored."""
        return Judgement(
            id=row["id"],
            query_id=row["query_id"],
            annotator_id=row["annotator_id"],
            source=row["source"],
            p=row["p"],
            created_at=row["created_at"],
            response_time_s=row["response_time_s"],
            meta=row["meta"],
        )

    def to_row(self) -> dict[str, Any]:
        """A JSON-ready dict (the inverse of :meth:`from_row`)."""
        return {
            "id": self.id,
            "query_id": self.query_id,
            "annotator_id": self.annotator_id,
            "source": self.source,
            "p": self.p,
            "created_at": self.created_at,
            "response_time_s": self.response_time_s,
            "meta": dict(self.meta),
        }

    @property
    def skipped(self) -> bool:
        """True when the annotator could not tell (no label results)."""
        return self.p is None


@dataclass(frozen=True, kw_only=True)
class Label:
    """A training target for the reward model: P(a ≻ b) = p, with the judgements it came from."""

    a: str
    """First segment id."""
    b: str
    """Second segment id."""
    p: float
    """P(a ≻ b) in [0, 1]."""
    judgement_ids: tuple[str, ...] = ()
    """Provenance: the judgements this label was derived from."""
    weight: float = 1.0
    """Relative weight in the loss (1 by default)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "p", check_probability(self.p))
        object.__setattr__(self, "judgement_ids", tuple(self.judgement_ids))
        if self.a == self.b:
            raise DataError(f"label compares segment {self.a} with itself")
        if not (self.weight >= 0 and math.isfinite(self.weight)):
            raise DataError(f"label weight must be finite and ≥ 0, got {self.weight}")


@dataclass(frozen=True, kw_only=True)
class Rating:
    """One real-time scalar value in [-1, 1] about the current step of a stream."""

    annotator_id: str
    """Who rated."""
    stream_id: str
    """The stream (episode being watched) it belongs to."""
    step: int
    """Environment step index within the stream that was on screen."""
    t: float
    """Timestamp (seconds) of the rating."""
    value: float
    """The rating in [-1, 1]."""

    def __post_init__(self) -> None:
        v = float(self.value)
        if math.isnan(v) or not -1.0 <= v <= 1.0:
            raise DataError(
                f"rating value must be in [-1, 1], got {self.value!r}; clip or rescale the slider"
            )
        if self.step < 0:
            raise DataError(f"rating step must be ≥ 0, got {self.step}")
        object.__setattr__(self, "value", v)


@dataclass(frozen=True, kw_only=True)
class Annotator:
    """Whoever judges: a person, a simulated teacher or an LLM. Tokens are stored hashed."""

    id: str
    """Stable id."""
    source: SourceKind
    """Kind of annotator."""
    name: str = ""
    """Display name."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Parameters of simulated annotators (β, γ, ε), model name of LLMs, etc."""

"""Per-round exploration data for the groupwise studio views, computed once and cached.

For each round the trainer published a pool for (``store.rounds.publish_pool``, see
:mod:`preflab.sources.studio_bridge`), the server computes, once:

- DTW distances between the pool's behaviours (observations, pooled standardisation) and the
  n-ary behaviour tree (:class:`preflab.selection.tree.BehaviourTree`);
- for every parent node its representative members (the medoid and two far members) and its
  spread (mean DTW distance between its members, relative to the pool's mean);
- from the members' predicted returns (when the ensemble was fitted): the suggestion edges
  (top pairs by ensemble disagreement) and the ranked group suggestions (disjoint pairs of
  tree groups of 2..8 behaviours, highest s_g first).

What goes to the browser (:meth:`RoundView.public_json`) holds ids, tree structure, relative
spreads, edge weights (disagreement) and ranks: no true reward, no predicted return, and no
distance matrix to recompute. A background thread watches the store and builds a newly
published round before anyone asks, and schedules the first previews' clips.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from preflab.errors import DataError
from preflab.kinds.group import GROUP_LIMIT
from preflab.selection.exploration import build_exploration
from preflab.selection.features import FeatureConfig
from preflab.selection.groupwise import GroupwiseConfig
from preflab.selection.tree import BehaviourTree
from preflab.store import FeedbackStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class GroupwiseStudioConfig:
    """How the studio builds and serves a round's exploration view."""

    max_group: int = GROUP_LIMIT
    """Most members a side of a group comparison may have (the paper's 8)."""
    levels: int = 3
    """Rings of the tree from the root to the leaves."""
    n_suggestions: int = 40
    """Grey suggestion edges: this many behaviour pairs with the highest disagreement."""
    n_group_suggestions: int = 20
    """Ranked group pairs 'Suggest next' walks through."""
    dtw_window: int | None = None
    """DTW Sakoe–Chiba window in steps (None = unconstrained)."""
    first_previews: int = 12
    """Clips rendered as soon as a round is built (representatives of the outer ring and the
    first suggested groups), at priority 1."""
    poll_s: float = 0.5
    """How often the watcher thread looks for a newly published round."""
    keep_rounds: int = 3
    """Built rounds kept in memory."""


@dataclass
class RoundView:
    """One round's exploration data (server side)."""

    round: int
    ids: list[str]
    index: dict[str, int]
    tree: BehaviourTree
    distances: np.ndarray
    """(N, N) DTW distances (server only)."""
    variance: np.ndarray | None
    """(N, N) ensemble disagreement, None before the first fit (server only)."""
    groups: list[tuple[int, ...]]
    """Candidate groups (dendrogram subtrees of 2..max_group rows)."""
    ranked: list[tuple[int, int, float]]
    """(group i, group j, s_g) of the suggested group pairs, best first."""
    public: dict[str, Any]
    """The browser's JSON (without the annotator's own history)."""
    built_at: float
    timings: dict[str, float] = field(default_factory=dict)

    def rows(self, segment_ids: list[str]) -> list[int]:
        return [self.index[s] for s in segment_ids]

    def spread(self, rows: list[int]) -> dict[str, Any]:
        """Mean DTW distance between the members (relative to the pool's mean pair) and the
        member farthest from the others (the likely outlier)."""
        if len(rows) < 2:
            return {"n": len(rows), "mean_dtw": None, "relative": None, "outlier": None}
        sub = self.distances[np.ix_(rows, rows)]
        iu = np.triu_indices(len(rows), k=1)
        mean = float(sub[iu].mean())
        pool = float(self.public["pool_mean_dtw"]) or 1.0
        per = sub.sum(1) / (len(rows) - 1)
        k = int(np.argmax(per))
        others = np.delete(per, k)
        outlier = self.ids[rows[k]] if len(rows) >= 3 and per[k] > 1.5 * np.median(others) else None
        return {
            "n": len(rows),
            "mean_dtw": round(mean, 4),
            "relative": round(mean / pool, 3),
            "outlier": outlier,
        }


def build_round(
    store: FeedbackStore, pool: dict[str, Any], config: GroupwiseStudioConfig
) -> RoundView:
    """Load a round's published pool and build its view with
    :func:`preflab.selection.exploration.build_exploration` (see the module doc)."""
    t0 = time.perf_counter()
    ids = list(pool["segment_ids"])
    segs = store.segments.get(ids)
    load_s = time.perf_counter() - t0
    rets = pool.get("member_returns")
    ex = build_exploration(
        segs,
        config=GroupwiseConfig(
            features=FeatureConfig(window=config.dtw_window), max_size=config.max_group
        ),
        levels=config.levels,
        n_suggestions=config.n_suggestions,
        n_group_suggestions=config.n_group_suggestions,
        rng=np.random.default_rng(int(pool["round"])),
        member_returns=None if rets is None else np.asarray(rets, dtype=np.float64),
    )
    ids, groups, ranked = ex.ids, ex.groups, ex.ranked
    view_json = ex.summary_json()
    first: list[str] = []
    if view_json["root"] is not None:
        for ch in view_json["root"].get("children", []):
            first += ch.get("reps", [])
    for g in ranked[:1]:
        first += [ids[r] for r in groups[g[0]]] + [ids[r] for r in groups[g[1]]]
    first = list(dict.fromkeys(first))[: config.first_previews]
    info = store.segments.info(ids)
    public = {
        "round": int(pool["round"]),
        "published_at": pool["published_at"],
        "n_behaviours": len(ids),
        "levels": config.levels,
        "max_group": config.max_group,
        "leaf_order": view_json["leaf_order"],
        "root": view_json["root"],
        "lengths": {s: info.get(s, {}).get("length") for s in ids},
        "suggestions": [{"a": e.a, "b": e.b, "weight": e.weight} for e in ex.suggestions],
        "group_suggestions": [
            {"rank": k, "a": [ids[r] for r in groups[i]], "b": [ids[r] for r in groups[j]]}
            for k, (i, j, _s) in enumerate(ranked)
        ],
        "has_ensemble": ex.pair_variance is not None,
        "pool_mean_dtw": ex.mean_distance,
        "first_previews": first,
    }
    return RoundView(
        round=int(pool["round"]),
        ids=ids,
        index={s: k for k, s in enumerate(ids)},
        tree=ex.tree,
        distances=ex.distances,
        variance=ex.pair_variance,
        groups=groups,
        ranked=ranked,
        public=public,
        built_at=time.time(),
        timings={"load": load_s, **ex.timings},
    )


class RoundBuildError(RuntimeError):
    """A round's exploration view could not be built (the traceback was logged once)."""

    def __init__(self, round: int, cause: Exception) -> None:
        super().__init__(
            f"the exploration view of round {round} could not be built "
            f"({type(cause).__name__}: {cause}); the studio log has the details. Pairwise "
            "comparisons still work; the next round is built afresh"
        )
        self.round = round


class GroupwiseCache:
    """Built rounds by number. Once someone has opened the Groups view, a watcher thread builds
    each new round as the trainer publishes it. Until then nothing is built: a round's DTW takes
    seconds of CPU that a pairwise-only session needs for its clips and answers."""

    def __init__(
        self,
        store: FeedbackStore,
        media: Any = None,
        config: GroupwiseStudioConfig | None = None,
    ) -> None:
        self.store = store
        self.media = media
        self.config = config or GroupwiseStudioConfig()
        self._views: dict[tuple[int, float], RoundView] = {}
        self._failed: dict[tuple[int, float], Exception] = {}
        """Rounds whose build failed: not rebuilt (nor logged) on every poll and request."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wanted = threading.Event()
        """Set by the first request for a view: from then on new rounds are built ahead."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the watcher thread (daemon; idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="groupwise-cache", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.is_set():
            if not self._wanted.is_set():
                self._stop.wait(self.config.poll_s)
                continue
            try:
                self.view(None)
            except RoundBuildError:  # logged once, when the build failed
                pass
            except Exception:  # a broken round must not kill the watcher
                log.exception("groupwise: building the latest round failed")
            self._stop.wait(self.config.poll_s)

    def view(self, round: int | None) -> RoundView | None:
        """The view of ``round`` (the latest published when None); None when not published.
        The first call also starts building later rounds ahead of their requests."""
        self._wanted.set()
        pool = self.store.rounds.pool(round)
        if pool is None:
            return None
        key = (int(pool["round"]), float(pool["published_at"]))
        with self._lock:  # one build at a time; concurrent callers wait for it
            v = self._views.get(key)
            if v is not None:
                return v
            if key in self._failed:
                raise RoundBuildError(key[0], self._failed[key])
            try:
                v = build_round(self.store, pool, self.config)
            except Exception as exc:
                log.exception("groupwise: building round %d failed", key[0])
                self._failed[key] = exc
                raise RoundBuildError(key[0], exc) from exc
            self._views[key] = v
            for old in sorted(self._views)[: max(0, len(self._views) - self.config.keep_rounds)]:
                del self._views[old]
        log.info("groupwise: round %d built (%d behaviours) %s", v.round, len(v.ids), v.timings)
        self._first_previews(v)
        return v

    def _first_previews(self, v: RoundView) -> None:
        """Schedule the clips the view shows first (outer-ring representatives, first
        suggested pair) at priority 1."""
        if self.media is None:
            return
        for sid in v.public["first_previews"]:
            try:
                self.media.request([sid], 1)
            except Exception:
                log.exception("groupwise: preview request failed for %s", sid)

    def check_members(self, v: RoundView, segment_ids: list[str], side: str) -> list[int]:
        """Rows of ``segment_ids`` in round ``v``'s pool (DataError naming strangers)."""
        missing = [s for s in segment_ids if s not in v.index]
        if missing:
            raise DataError(
                f"group {side} names behaviour(s) that are not in round {v.round}'s pool: "
                f"{missing[:3]}; pick behaviours from the current exploration view"
            )
        return v.rows(segment_ids)

"""The behaviour tree: agglomerative clustering of DTW distances (paper 000, §3.3–3.4).

The binary dendrogram comes from scipy; its leaf order is the order of the inner ring of the
radial chart. The n-ary view cuts the dendrogram at merge-distance thresholds: with L levels
the cuts produce about N^(k/L) clusters at ring k (k = 1..L−1), so rings grow geometrically
from the root to the leaves. Every node is a selectable group. :meth:`BehaviourTree.to_json`
writes what a D3 radial chart needs: the nested hierarchy plus suggestion and history edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.cluster.hierarchy import fcluster, leaves_list, linkage, optimal_leaf_ordering
from scipy.spatial.distance import squareform

from preflab.errors import ConfigError, DataError
from preflab.records import Label

LINKAGE_METHODS = ("average", "complete", "single", "weighted")
"""Linkages valid on a precomputed (non-Euclidean) distance matrix with monotone heights."""


@dataclass(frozen=True)
class TreeNode:
    """One node of the n-ary view."""

    id: str
    """Stable id within the tree: 'root', 'n<level>-<k>' or 'leaf-<row>'."""
    depth: int
    """0 for the root, ``levels`` for leaves."""
    rows: tuple[int, ...]
    """Rows (behaviour indices) under this node, in leaf order."""
    children: tuple[str, ...]
    """Ids of the child nodes, in leaf order (empty for leaves)."""
    height: float
    """Largest merge distance inside the node (0 for a leaf)."""


@dataclass(frozen=True)
class SuggestionEdge:
    """A suggested comparison between two behaviours (grey line)."""

    a: str
    b: str
    weight: float
    """Ensemble disagreement (variance of P(a ≻ b)); larger = more uncertain."""


class BehaviourTree:
    """Agglomerative clustering of behaviours; binary groups and an n-ary view."""

    def __init__(self, ids: Sequence[str], linkage_matrix: np.ndarray, *, levels: int = 3) -> None:
        self.ids = tuple(ids)
        self.linkage = np.asarray(linkage_matrix, dtype=np.float64)
        n = len(self.ids)
        if n >= 2 and self.linkage.shape != (n - 1, 4):
            raise DataError(
                f"linkage must have shape ({n - 1}, 4) for {n} behaviours, got {self.linkage.shape}"
            )
        if levels < 1:
            raise ConfigError(f"levels must be ≥ 1 (root → leaves), got {levels}")
        self.levels = levels
        self.leaf_order = leaves_list(self.linkage) if n >= 2 else np.zeros(n, dtype=np.int64)
        self._pos = np.empty(n, dtype=np.int64)
        self._pos[self.leaf_order] = np.arange(n)
        self.nodes = self._nary()

    # ----- construction ------------------------------------------------------------------
    @staticmethod
    def build(
        distances: np.ndarray,
        ids: Sequence[str],
        *,
        method: str = "average",
        levels: int = 3,
        optimal_order: bool = False,
    ) -> BehaviourTree:
        """Cluster an (N, N) or condensed distance matrix of the behaviours ``ids``.

        ``optimal_order`` reorders leaves so that neighbours are as close as possible (scipy's
        optimal leaf ordering; slower, O(N³)-ish, fine for a few hundred behaviours).
        """
        if method not in LINKAGE_METHODS:
            raise ConfigError(f"method must be one of {LINKAGE_METHODS}, got {method!r}")
        n = len(ids)
        if n == 0:
            raise DataError("no behaviours to cluster; collect segments first")
        if len(set(ids)) != n:
            raise DataError("behaviour ids must be unique; the same segment was passed twice")
        d = np.asarray(distances, dtype=np.float64)
        if d.ndim == 2:
            if d.shape != (n, n):
                raise DataError(f"distance matrix must be ({n}, {n}) for {n} ids, got {d.shape}")
            d = squareform(d, checks=False)
        if d.shape != (n * (n - 1) // 2,):
            raise DataError(
                f"condensed distances must have {n * (n - 1) // 2} entries, got {d.shape}"
            )
        if not np.all(np.isfinite(d)) or (d < 0).any():
            raise DataError("distances must be finite and ≥ 0; check the behaviours' features")
        if n == 1:
            return BehaviourTree(ids, np.zeros((0, 4)), levels=levels)
        z = linkage(d, method=method)
        if optimal_order:
            z = optimal_leaf_ordering(z, d)
        return BehaviourTree(ids, z, levels=levels)

    def _thresholds(self) -> list[float]:
        """Merge-distance cuts, coarsest first: about N^(k/L) clusters at ring k."""
        n = len(self.ids)
        if n < 2 or self.levels < 2:
            return []
        h = np.sort(self.linkage[:, 2])[::-1]  # descending merge heights (N − 1)
        cuts = []
        for k in range(1, self.levels):
            c = int(np.clip(round(n ** (k / self.levels)), 2, n))  # target clusters at ring k
            hi = h[c - 2]
            lo = h[c - 1] if c - 1 < len(h) else 0.0
            cuts.append(0.5 * (hi + lo))
        return cuts

    def _nary(self) -> list[TreeNode]:
        n = len(self.ids)
        order = self.leaf_order
        # cluster labels per ring: ring 0 = root (one cluster), rings 1..L-1 = cuts, ring L = leaves
        rings: list[np.ndarray] = [np.zeros(n, dtype=np.int64)]
        if n >= 2:
            for t in self._thresholds():
                rings.append(fcluster(self.linkage, t, criterion="distance").astype(np.int64))
        else:
            rings += [np.zeros(n, dtype=np.int64)] * (self.levels - 1)
        rings.append(np.arange(n, dtype=np.int64))
        coph = self._subtree_heights()
        nodes: list[TreeNode] = []

        def make(depth: int, rows: np.ndarray, key: str) -> str:
            rows = rows[np.argsort(self._pos[rows])]
            if depth == self.levels:
                nid = f"leaf-{int(rows[0])}"
                nodes.append(TreeNode(nid, depth, (int(rows[0]),), (), 0.0))
                return nid
            labels = rings[depth + 1][rows]
            child_ids: list[str] = []
            seen: list[int] = []
            for lab in labels:  # child clusters in leaf order
                if int(lab) not in seen:
                    seen.append(int(lab))
            idx = len(nodes)
            nodes.append(TreeNode(key, depth, (), (), 0.0))  # placeholder keeps parent first
            for c, lab in enumerate(seen):
                child_ids.append(
                    make(depth + 1, rows[labels == lab], f"{key}.{c}" if depth else f"n{c}")
                )
            nodes[idx] = TreeNode(
                key, depth, tuple(int(r) for r in rows), tuple(child_ids), coph(rows)
            )
            return key

        make(0, order.copy(), "root")
        return nodes

    def _subtree_heights(self):
        """Height lookup: clusters of a cut are dendrogram subtrees, contiguous in leaf order,
        so (first leaf position, size) identifies the subtree and its top merge height."""
        n = len(self.ids)
        first = list(self._pos.tolist())
        size = [1] * n
        table: dict[tuple[int, int], float] = {}
        for a, b, dist, cnt in self.linkage:
            f = min(first[int(a)], first[int(b)])
            first.append(f)
            size.append(int(cnt))
            table[(f, int(cnt))] = float(dist)

        def height(rows: np.ndarray) -> float:
            if len(rows) < 2:
                return 0.0
            return table.get((int(self._pos[rows].min()), len(rows)), 0.0)

        return height

    # ----- groups ------------------------------------------------------------------------
    def binary_groups(self, *, min_size: int = 2, max_size: int = 8) -> list[tuple[int, ...]]:
        """Rows of every dendrogram subtree with min_size ≤ size ≤ max_size (leaf order)."""
        n = len(self.ids)
        if n < 2:
            return []
        members: list[list[int] | None] = [[i] for i in range(n)]
        out: list[tuple[int, ...]] = []
        for a, b, _d, _c in self.linkage:
            ma, mb = members[int(a)], members[int(b)]
            merged = None if ma is None or mb is None or len(ma) + len(mb) > max_size else ma + mb
            members.append(merged)
            if merged is not None and len(merged) >= min_size:
                out.append(tuple(sorted(merged, key=lambda r: self._pos[r])))
        return out

    def node(self, node_id: str) -> TreeNode:
        """The n-ary node with this id (DataError if unknown)."""
        for nd in self.nodes:
            if nd.id == node_id:
                return nd
        raise DataError(f"no tree node {node_id!r}; ids are 'root', 'n<k>[.<k>…]' or 'leaf-<row>'")

    # ----- export ------------------------------------------------------------------------
    def to_json(
        self,
        *,
        suggestions: Sequence[SuggestionEdge] = (),
        history: Sequence[Label] = (),
        group_suggestions: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """A JSON-serialisable dict for a D3 radial chart.

        ``root`` is the nested hierarchy (``d3.hierarchy(data.root)``): every node has ``id``,
        ``depth``, ``size``, ``height``, ``segments`` (leaf segment ids under it, in leaf order)
        and ``children``; leaves also have ``segment``. ``leaf_order`` lists segment ids around
        the inner ring. ``suggestions`` are grey edges {a, b, weight}; ``history`` are coloured
        edges {a, b, p, preferred ('a' | 'b' | 'equal'), judgement_ids}; ``group_suggestions``
        are passed through ({a: [...ids], b: [...ids], score}). No rewards are included.
        """
        by_id = {nd.id: nd for nd in self.nodes}

        def nested(nid: str) -> dict[str, Any]:
            nd = by_id[nid]
            segs = [self.ids[r] for r in nd.rows]
            out: dict[str, Any] = {
                "id": nd.id,
                "depth": nd.depth,
                "size": len(segs),
                "height": nd.height,
                "segments": segs,
            }
            if nd.children:
                out["children"] = [nested(c) for c in nd.children]
            else:
                out["segment"] = segs[0]
            return out

        known = set(self.ids)
        hist = []
        for lab in history:
            if lab.a not in known or lab.b not in known:
                continue  # past comparisons of behaviours not in this round's tree
            pref = "a" if lab.p > 0.5 else "b" if lab.p < 0.5 else "equal"
            hist.append(
                {
                    "a": lab.a,
                    "b": lab.b,
                    "p": lab.p,
                    "preferred": pref,
                    "judgement_ids": list(lab.judgement_ids),
                }
            )
        return {
            "version": 1,
            "levels": self.levels,
            "n_behaviours": len(self.ids),
            "leaf_order": [self.ids[r] for r in self.leaf_order],
            "root": nested("root") if self.ids else None,
            "suggestions": [{"a": e.a, "b": e.b, "weight": e.weight} for e in suggestions],
            "history": hist,
            "group_suggestions": list(group_suggestions),
        }


def suggestion_edges(
    pair_variance: np.ndarray, ids: Sequence[str], k: int = 20
) -> list[SuggestionEdge]:
    """The k behaviour pairs with the highest ensemble disagreement, highest first."""
    v = np.asarray(pair_variance, dtype=np.float64)
    n = len(ids)
    if v.shape != (n, n):
        raise DataError(f"pair_variance must be ({n}, {n}) for {n} ids, got {v.shape}")
    if k < 0:
        raise ConfigError(f"k must be ≥ 0, got {k}")
    if n < 2 or k == 0:
        return []
    iu, ju = np.triu_indices(n, k=1)
    w = 0.5 * (v[iu, ju] + v[ju, iu])
    k = min(k, len(w))
    top = np.argpartition(-w, k - 1)[:k]
    top = top[np.argsort(-w[top], kind="stable")]
    return [SuggestionEdge(ids[iu[t]], ids[ju[t]], float(w[t])) for t in top]

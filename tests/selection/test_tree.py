"""Behaviour tree: clusters, binary groups, n-ary view and the D3 JSON export."""

from __future__ import annotations

import json

import numpy as np
import pytest

from preflab.errors import ConfigError, DataError
from preflab.records import Label
from preflab.selection.features import behaviour_distances
from preflab.selection.tree import BehaviourTree, suggestion_edges


def _clustered(
    n_clusters: int = 3, per: int = 4, seed: int = 0
) -> tuple[list[np.ndarray], list[int]]:
    rng = np.random.default_rng(seed)
    xs, truth = [], []
    for c in range(n_clusters):
        for _ in range(per):
            t = int(rng.integers(15, 25))
            xs.append(10.0 * c + 0.1 * rng.normal(size=(t, 2)))
            truth.append(c)
    return xs, truth


def _tree(levels: int = 3) -> tuple[BehaviourTree, list[int]]:
    xs, truth = _clustered()
    d = behaviour_distances(xs)
    return BehaviourTree.build(d, [f"s{i}" for i in range(len(xs))], levels=levels), truth


def test_clusters_are_binary_groups_and_contiguous_in_leaf_order() -> None:
    tree, truth = _tree()
    assert sorted(tree.leaf_order.tolist()) == list(range(12))
    groups = tree.binary_groups(min_size=2, max_size=8)
    for c in range(3):
        members = tuple(i for i, t in enumerate(truth) if t == c)
        assert any(set(g) == set(members) for g in groups)
    pos = {int(r): k for k, r in enumerate(tree.leaf_order)}
    for g in groups:
        assert 2 <= len(g) <= 8
        p = sorted(pos[r] for r in g)
        assert p == list(range(p[0], p[0] + len(g)))  # a subtree is a run of the leaf order
    assert all(len(g) <= 3 for g in tree.binary_groups(max_size=3))


@pytest.mark.parametrize("levels", [1, 2, 3, 4])
def test_nary_view_structure(levels: int) -> None:
    tree, _ = _tree(levels)
    by_id = {nd.id: nd for nd in tree.nodes}
    assert len(by_id) == len(tree.nodes)
    root = by_id["root"]
    assert root.depth == 0 and len(root.rows) == 12
    leaves = [nd for nd in tree.nodes if not nd.children]
    assert sorted(r for nd in leaves for r in nd.rows) == list(range(12))
    assert all(nd.depth == levels for nd in leaves)
    for nd in tree.nodes:
        if nd.children:
            kids = [by_id[c] for c in nd.children]
            assert all(k.depth == nd.depth + 1 for k in kids)
            assert [r for k in kids for r in k.rows] == list(nd.rows)  # partition, leaf order
    assert [nd.rows[0] for nd in leaves] == [int(r) for r in tree.leaf_order]


def test_three_levels_separate_the_three_clusters() -> None:
    tree, truth = _tree(levels=2)  # ≈ 12^(1/2) ≈ 3 clusters at ring 1
    ring1 = [nd for nd in tree.nodes if nd.depth == 1]
    assert sorted(sorted(truth[r] for r in nd.rows) for nd in ring1) == [[0] * 4, [1] * 4, [2] * 4]
    assert tree.node("root").height >= max(nd.height for nd in ring1)


def test_json_export() -> None:
    tree, _ = _tree()
    ids = list(tree.ids)
    v = np.zeros((12, 12))
    v[0, 5] = v[5, 0] = 0.3
    v[2, 9] = v[9, 2] = 0.2
    v[1, 3] = v[3, 1] = 0.1
    sugg = suggestion_edges(v, ids, k=2)
    assert [(e.a, e.b, e.weight) for e in sugg] == [("s0", "s5", 0.3), ("s2", "s9", 0.2)]
    history = [
        Label(a="s1", b="s7", p=1.0, judgement_ids=("j1",)),
        Label(a="s4", b="s2", p=0.0),
        Label(a="s3", b="s6", p=0.5),
        Label(a="s3", b="gone", p=1.0),
    ]
    data = json.loads(json.dumps(tree.to_json(suggestions=sugg, history=history)))
    assert data["n_behaviours"] == 12 and data["levels"] == 3
    assert sorted(data["leaf_order"]) == sorted(ids)
    assert data["suggestions"][0] == {"a": "s0", "b": "s5", "weight": 0.3}
    assert [h["preferred"] for h in data["history"]] == ["a", "b", "equal"]  # unknown ids dropped
    assert data["history"][0]["judgement_ids"] == ["j1"]

    seen_ids, leaves = set(), []

    def walk(node: dict, depth: int) -> None:
        assert node["depth"] == depth and node["id"] not in seen_ids
        seen_ids.add(node["id"])
        assert node["size"] == len(node["segments"])
        if "children" in node:
            assert [s for c in node["children"] for s in c["segments"]] == node["segments"]
            for c in node["children"]:
                walk(c, depth + 1)
        else:
            assert node["segments"] == [node["segment"]]
            leaves.append(node["segment"])

    walk(data["root"], 0)
    assert leaves == data["leaf_order"]
    assert "reward" not in json.dumps(data)  # never shows rewards


def test_single_behaviour_and_bad_input() -> None:
    t = BehaviourTree.build(np.zeros((1, 1)), ["only"])
    assert t.to_json()["leaf_order"] == ["only"]
    assert t.binary_groups() == []
    with pytest.raises(DataError, match="no behaviours"):
        BehaviourTree.build(np.zeros((0, 0)), [])
    with pytest.raises(DataError, match=r"\(3, 3\)"):
        BehaviourTree.build(np.zeros((2, 2)), ["a", "b", "c"])
    with pytest.raises(DataError, match="unique"):
        BehaviourTree.build(np.zeros((2, 2)), ["a", "a"])
    with pytest.raises(DataError, match="finite"):
        BehaviourTree.build(np.full((2, 2), np.nan), ["a", "b"])
    with pytest.raises(ConfigError, match="method"):
        BehaviourTree.build(np.zeros((2, 2)), ["a", "b"], method="ward")
    with pytest.raises(ConfigError, match="levels"):
        BehaviourTree.build(np.zeros((2, 2)), ["a", "b"], levels=0)


def test_exploration_view_with_an_ensemble() -> None:
    from preflab.reward import RewardConfig, RewardEnsemble
    from preflab.selection.exploration import build_exploration
    from preflab.testing.factories import make_segment

    rng = np.random.default_rng(3)
    segs = []
    for i in range(24):
        obs = (i % 3 + 0.1 * rng.normal(size=(int(rng.integers(8, 14)), 2))).astype(np.float32)
        acts = rng.normal(size=(len(obs), 1)).astype(np.float32)
        segs.append(make_segment(f"s{i}", obs=obs, acts=acts))
    ens = RewardEnsemble(2, 1, RewardConfig(members=3, hidden=(8,)), seed=0)
    view = build_exploration(segs, ens, n_suggestions=5, n_group_suggestions=2)
    assert set(view.timings) == {"dtw", "tree", "variance", "suggestions"}
    data = json.loads(json.dumps(view.to_json()))
    assert len(data["suggestions"]) == 5
    weights = [e["weight"] for e in data["suggestions"]]
    assert weights == sorted(weights, reverse=True)
    assert weights[0] == pytest.approx(view.pair_variance.max())
    assert 1 <= len(data["group_suggestions"]) <= 2
    for g in data["group_suggestions"]:
        assert 2 <= len(g["a"]) <= 8 and 2 <= len(g["b"]) <= 8 and not set(g["a"]) & set(g["b"])
    plain = build_exploration(segs, None)
    assert plain.suggestions == [] and plain.pair_variance is None


def test_exploration_from_published_returns_equals_the_live_ensemble() -> None:
    """The studio builds its view from the member returns the trainer published; the speed
    benchmark from a live ensemble: one implementation, the same view."""
    from preflab.records import Segment
    from preflab.reward import RewardConfig, RewardEnsemble, SegmentBatch
    from preflab.selection.exploration import build_exploration

    rng = np.random.default_rng(4)
    segs = []
    for i in range(20):
        obs = (i % 4 + 0.1 * rng.normal(size=(int(rng.integers(6, 12)), 2))).astype(np.float32)
        acts = rng.normal(size=(len(obs), 1)).astype(np.float32)
        segs.append(Segment(id=f"s{i}", obs=obs, acts=acts, true_rewards=np.zeros(len(obs))))
    ens = RewardEnsemble(2, 1, RewardConfig(members=3, hidden=(8,)), seed=1)
    returns = ens.segment_returns(SegmentBatch.from_segments(segs))
    live = build_exploration(segs, ens, n_group_suggestions=3, rng=np.random.default_rng(7))
    published = build_exploration(
        segs, member_returns=returns, n_group_suggestions=3, rng=np.random.default_rng(7)
    )
    assert live.to_json() == published.to_json() and live.ranked == published.ranked
    np.testing.assert_array_equal(live.pair_variance, published.pair_variance)
    assert live.distances.shape == (20, 20) and np.allclose(live.distances, live.distances.T)
    summary = published.summary_json()
    assert "height" not in summary["root"] and len(summary["root"]["reps"]) == 3
    one = build_exploration(segs, member_returns=returns[:1])  # one member: no disagreement
    assert one.pair_variance is None and one.suggestions == [] and one.ranked == []

"""The aggregator protocol and its implementations, checked against hand-derived cases."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from preflab.aggregate import (
    AGGREGATORS,
    Aggregator,
    ConfidenceAggregator,
    Feedback,
    IdentityAggregator,
    MajorityAggregator,
    SMLAggregator,
    VotingAggregator,
    WindowAggregator,
    latest,
    majority,
    make_aggregator,
)
from preflab.errors import ConfigError, DataError
from preflab.kinds import answer_labels
from preflab.records import Query, Rating
from preflab.testing.factories import make_judgement, make_query, make_segment


# ----- latest-wins ---------------------------------------------------------------------------
def test_latest_answer_per_annotator_and_query() -> None:
    js = [
        make_judgement("j0", "q", "u", 1.0, created_at=5.0),
        make_judgement(
            "j1", "q", "u", 0.0, created_at=3.0
        ),  # earlier time: superseded by j0 despite arriving later
        make_judgement("j2", "q", "v", 1.0, created_at=1.0),
        make_judgement(
            "j3", "q", "v", 0.0, created_at=1.0
        ),  # same time: the later in sequence wins
        make_judgement("j4", "r", "u", 1.0),
        make_judgement("j5", "q", "w", 1.0, meta={"sample": 0}),
        make_judgement("j6", "q", "w", 0.0, meta={"sample": 1}),  # another sample: not a repeat
    ]
    assert latest(js).tolist() == [0, 3, 4, 5, 6]
    assert latest([]).tolist() == []


def test_every_aggregator_uses_the_latest_answer() -> None:
    qs = {"q": make_query("q")}
    js = [
        make_judgement("j0", "q", "u", 1.0, created_at=1.0),
        make_judgement("j1", "q", "u", 0.0, created_at=2.0),
    ]
    fb = Feedback(queries=qs, judgements=js)
    for agg in (IdentityAggregator(), ConfidenceAggregator(), MajorityAggregator()):
        assert [lab.p for lab in agg.labels(fb)] == [0.0], agg.name
    # a later skip withdraws the vote
    fb = Feedback(
        queries=qs, judgements=[*js, make_judgement("j2", "q", "u", None, created_at=3.0)]
    )
    for agg in (IdentityAggregator(), ConfidenceAggregator(), MajorityAggregator()):
        assert agg.labels(fb) == [], agg.name


# ----- group expansion -----------------------------------------------------------------------
@pytest.mark.parametrize("m", range(1, 9))
@pytest.mark.parametrize("n", range(1, 9))
def test_expand_group_gives_max_m_n_pairs_covering_every_member(m: int, n: int) -> None:
    q = Query(
        id=f"g{m}{n}",
        kind="group",
        a=tuple(f"a{i}" for i in range(m)),
        b=tuple(f"b{i}" for i in range(n)),
    )
    labels = answer_labels(q, 0.75, ("j",))
    assert len(labels) == max(m, n)
    assert {lab.a for lab in labels} == set(q.a) and {lab.b for lab in labels} == set(q.b)
    # the larger side appears exactly once, the smaller as evenly as possible
    small = Counter(lab.b for lab in labels) if m >= n else Counter(lab.a for lab in labels)
    k, s = max(m, n), min(m, n)
    assert set(small.values()) <= {k // s, -(-k // s)}
    assert all(lab.p == 0.75 and lab.judgement_ids == ("j",) for lab in labels)
    assert labels == answer_labels(q, 0.75, ("j",))  # same query id → same pairs


def test_expand_group_pair_and_rating_queries() -> None:
    assert [(x.a, x.b, x.p) for x in answer_labels(make_query("q"), 1.0, ())] == [("a", "b", 1.0)]
    with pytest.raises(DataError, match="rating"):
        answer_labels(Query(id="s", kind="rating", a=("x",)), 1.0, ())


# ----- identity and confidence ---------------------------------------------------------------
def test_identity_one_label_per_answer_and_group_expansion() -> None:
    g = Query(id="g", kind="group", a=("a0", "a1", "a2"), b=("b0",))
    qs = {"q": make_query("q"), "g": g}
    js = [
        make_judgement("j0", "q", "u", 1.0),
        make_judgement("j1", "q", "v", 0.0),
        make_judgement("j2", "q", "w", None),
        make_judgement("j3", "g", "u", 0.0),
    ]
    labels = IdentityAggregator().labels(Feedback(queries=qs, judgements=js))
    assert [(x.a, x.b, x.p, x.judgement_ids) for x in labels[:2]] == [
        ("a", "b", 1.0, ("j0",)),
        ("a", "b", 0.0, ("j1",)),
    ]
    grp = labels[2:]
    assert len(grp) == 3 and {x.a for x in grp} == {"a0", "a1", "a2"}
    assert all(x.b == "b0" and x.p == 0.0 and x.judgement_ids == ("j3",) for x in grp)


def test_confidence_is_the_share_of_parseable_answers_preferring_a() -> None:
    g = Query(id="g", kind="group", a=("a0", "a1"), b=("b0", "b1", "b2"))
    qs = {"q": make_query("q"), "r": make_query("r", "c", "d"), "g": g}
    js = [
        make_judgement("j0", "q", "llm", 1.0, meta={"sample": 0}),
        make_judgement("j1", "q", "llm", 1.0, meta={"sample": 1}),
        make_judgement("j2", "q", "llm", 0.0, meta={"sample": 2}),
        make_judgement("j3", "q", "llm", None, meta={"sample": 3}),  # unparseable: ignored
        make_judgement("j4", "r", "llm", None, meta={"sample": 0}),  # nothing parseable: no label
        make_judgement("j5", "g", "llm", 1.0, meta={"sample": 0}),
        make_judgement("j6", "g", "other", 0.0, meta={"sample": 0}),  # two annotators are pooled
    ]
    labels = ConfidenceAggregator().labels(Feedback(queries=qs, judgements=js))
    first = labels[0]
    assert (first.a, first.b, first.judgement_ids) == ("a", "b", ("j0", "j1", "j2"))
    assert first.p == pytest.approx(2 / 3)
    grp = labels[1:]
    assert len(grp) == 3 and all(x.p == 0.5 and x.judgement_ids == ("j5", "j6") for x in grp)


# ----- majority and SML ----------------------------------------------------------------------
def test_majority_and_sml_labels_match_the_votes_matrix_estimators() -> None:
    rng = np.random.default_rng(3)
    n_ann, n_q = 6, 50
    acc = np.array([0.95, 0.9, 0.85, 0.8, 0.6, 0.55])
    y = rng.choice([-1, 1], n_q)
    votes = np.where(rng.random((n_ann, n_q)) < acc[:, None], y, -y)
    qs = {f"q{k:02d}": make_query(f"q{k:02d}", f"a{k}", f"b{k}") for k in range(n_q)}
    js = [
        make_judgement(f"j{i}-{k}", f"q{k:02d}", f"u{i}", 1.0 if votes[i, k] > 0 else 0.0)
        for k in range(n_q)
        for i in range(n_ann)
    ]
    fb = Feedback(queries=qs, judgements=js)
    maj = {x.a: x.p for x in MajorityAggregator().labels(fb)}
    # independent: count the +1 votes by hand
    for k in range(n_q):
        plus = int((votes[:, k] > 0).sum())
        want = 1.0 if plus > n_ann - plus else 0.0 if plus < n_ann - plus else 0.5
        assert maj[f"a{k}"] == want
    sml_agg = SMLAggregator()
    got = {x.a: x.p for x in sml_agg.labels(fb)}
    assert sml_agg.last_sml is not None
    w = sml_agg.last_sml.weights
    for k in range(n_q):
        s = float(votes[:, k] @ w)
        want = 1.0 if s > 0 else 0.0 if s < 0 else {1: 1.0, -1: 0.0, 0: 0.5}[majority(votes)[k]]
        assert got[f"a{k}"] == want
    # SML should be at least as accurate as majority on this crowd (two weak annotators)
    truth = {f"a{k}": 1.0 if y[k] > 0 else 0.0 for k in range(n_q)}
    assert sum(got[a] == t for a, t in truth.items()) >= sum(maj[a] == t for a, t in truth.items())


def test_majority_expands_group_queries_once_per_query() -> None:
    g = Query(id="g", kind="group", a=("a0", "a1", "a2", "a3"), b=("b0", "b1"))
    js = [
        make_judgement("j0", "g", "u", 1.0),
        make_judgement("j1", "g", "v", 1.0),
        make_judgement("j2", "g", "w", 0.0),
    ]
    labels = MajorityAggregator().labels(Feedback(queries={"g": g}, judgements=js))
    assert len(labels) == 4 and all(x.p == 1.0 for x in labels)
    assert all(x.judgement_ids == ("j0", "j1", "j2") for x in labels)
    assert labels == answer_labels(g, 1.0, ("j0", "j1", "j2"))


# ----- window (Algorithm 1) ------------------------------------------------------------------
def _stream():
    """Items of lengths 2, 3, 1, 2 (steps 0-1, 2-4, 5, 6-7)."""
    segs = {f"i{k}": make_segment(f"i{k}", length=n, obs_dim=1) for k, n in enumerate((2, 3, 1, 2))}
    q = Query(id="s", kind="rating", a=("i0", "i1", "i2", "i3"))
    r = [
        Rating(annotator_id="u", stream_id="s", step=0, t=0.0, value=0.5),
        Rating(annotator_id="u", stream_id="s", step=1, t=0.1, value=0.3),  # item 0: 0.4
        Rating(annotator_id="u", stream_id="s", step=3, t=0.2, value=-0.2),  # item 1: −0.2
        # item 2 unrated
        Rating(annotator_id="u", stream_id="s", step=6, t=0.3, value=0.45),
        Rating(annotator_id="u", stream_id="s", step=7, t=0.4, value=0.35),  # item 3: 0.4
        Rating(annotator_id="v", stream_id="s", step=5, t=0.0, value=1.0),  # item 2: 1.0
        Rating(annotator_id="v", stream_id="s", step=2, t=0.1, value=-1.0),  # item 1: −1.0
    ]
    return {"s": q}, segs, r


def test_window_labels_from_a_hand_written_rating_stream() -> None:
    qs, segs, r = _stream()
    fb = Feedback(queries=qs, judgements=[], ratings=r, segments=segs)
    got = WindowAggregator(window=2, delta=0.1, annotators=("u",)).labels(fb)
    # u's rated items 0, 1, 3 with values 0.4, −0.2, 0.4; windows of 2: (0, 1), (1, 3)
    assert [(x.a, x.b, x.p) for x in got] == [("i0", "i1", 1.0), ("i1", "i3", 0.0)]
    assert all(x.judgement_ids == ("ratings:s:u",) for x in got)
    got = WindowAggregator(window=3, delta=0.1, annotators=("u",)).labels(fb)
    # one window of 3: (0, 1) → 1, (0, 3) → |0.4 − 0.4| < δ → 0.5, (1, 3) → 0
    assert [(x.a, x.b, x.p) for x in got] == [
        ("i0", "i1", 1.0),
        ("i0", "i3", 0.5),
        ("i1", "i3", 0.0),
    ]
    # everyone: v's items 1 (−1.0) and 2 (1.0) → one pair, 0
    got = WindowAggregator(window=2, delta=0.1).labels(fb)
    assert [(x.a, x.b, x.p, x.judgement_ids) for x in got][-1] == (
        "i1",
        "i2",
        0.0,
        ("ratings:s:v",),
    )
    assert len(got) == 3
    # a window longer than what was rated gives nothing
    assert WindowAggregator(window=4, annotators=("u",)).labels(fb) == []


def test_window_counts_follow_the_paper() -> None:
    n_items, window = 25, 10
    segs = {f"i{k}": make_segment(f"i{k}", length=3, obs_dim=1) for k in range(n_items)}
    q = Query(id="s", kind="rating", a=tuple(segs))
    vals = np.linspace(-1, 1, n_items)
    r = [
        Rating(annotator_id="u", stream_id="s", step=3 * k + 1, t=float(k), value=float(v))
        for k, v in enumerate(vals)
    ]
    fb = Feedback(queries={"s": q}, judgements=[], ratings=r, segments=segs)
    got = WindowAggregator(window=window, delta=0.1).labels(fb)
    assert len(got) == (n_items - window + 1) * window * (window - 1) // 2
    # values increase along the stream and consecutive ones differ by 1/12 < δ = 0.1
    idx = {f"i{k}": k for k in range(n_items)}
    for x in got:
        gap = idx[x.b] - idx[x.a]
        assert gap > 0 and x.p == (0.5 if gap == 1 else 0.0)


def test_window_errors() -> None:
    qs, segs, r = _stream()
    with pytest.raises(DataError, match="segments"):
        WindowAggregator().labels(Feedback(queries=qs, judgements=[], ratings=r))
    bad = [Rating(annotator_id="u", stream_id="s", step=8, t=0.0, value=0.0)]
    with pytest.raises(DataError, match="8 steps"):
        WindowAggregator().labels(Feedback(queries=qs, judgements=[], ratings=bad, segments=segs))
    with pytest.raises(DataError, match="not a rating stream"):
        WindowAggregator().labels(Feedback(queries={}, judgements=[], ratings=r, segments=segs))
    with pytest.raises(ConfigError):
        WindowAggregator(window=1)


# ----- voting (Algorithm 2) ------------------------------------------------------------------
def test_voting_learns_the_evaluators_order_and_averages_votes() -> None:
    n_items, window = 30, 10
    xs = np.linspace(-1, 1, n_items)
    segs = {f"i{k}": make_segment(f"i{k}", obs=np.full((1, 1), x)) for k, x in enumerate(xs)}
    rng = np.random.default_rng(0)
    order = rng.permutation(n_items)  # the stream shows the items in random order of quality
    q = Query(id="s", kind="rating", a=tuple(f"i{k}" for k in order))
    r = [
        Rating(
            annotator_id=who,
            stream_id="s",
            step=t,
            t=float(t),
            value=float(np.clip(xs[k] + noise, -1, 1)),
        )
        for who, noise in (("u", 0.0), ("v", 0.05))
        for t, k in enumerate(order)
    ]
    fb = Feedback(queries={"s": q}, judgements=[], ratings=r, segments=segs)
    agg = VotingAggregator(window=window, seed=1)
    labels = agg.labels(fb)
    assert len(labels) == (n_items - window + 1) * window * (window - 1) // 2
    # two evaluators, votes in {0, 0.5, 1}: the mean is a multiple of 1/4
    assert all(abs(4 * x.p - round(4 * x.p)) < 1e-9 for x in labels)
    assert all(x.judgement_ids == ("ratings:s:u", "ratings:s:v") for x in labels)
    # pairs far apart in quality are labelled by the evaluators' order
    far = [x for x in labels if abs(segs[x.a].obs[0, 0] - segs[x.b].obs[0, 0]) > 0.5]
    right = [x.p == (1.0 if segs[x.a].obs[0, 0] > segs[x.b].obs[0, 0] else 0.0) for x in far]
    assert len(far) > 20 and np.mean(right) > 0.9
    assert [x.p for x in agg.labels(fb)] == [x.p for x in labels]  # seeded: reproducible
    assert VotingAggregator(annotators=("nobody",)).labels(fb) == []


# ----- the protocol and the factory ----------------------------------------------------------
def test_make_aggregator_builds_every_named_aggregator() -> None:
    for name in AGGREGATORS:
        agg = make_aggregator(name)
        assert isinstance(agg, Aggregator) and agg.name == name
    assert make_aggregator("window", window=5, annotators=["u"]).annotators == ("u",)  # type: ignore[attr-defined]
    assert make_aggregator("sml", strict=True).strict  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="unknown aggregator"):
        make_aggregator("mean")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="does not take"):
        make_aggregator("identity", window=3)


def test_unknown_queries_are_an_error_everywhere() -> None:
    fb = Feedback(queries={}, judgements=[make_judgement("j", "q", "u", 1.0)])
    for name in ("identity", "confidence", "majority", "sml"):
        with pytest.raises(DataError, match="unknown query"):
            make_aggregator(name).labels(fb)  # type: ignore[arg-type]

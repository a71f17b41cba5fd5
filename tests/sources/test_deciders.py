"""Simulated decision makers: Eq. 1 noise statistics, the overlap rule, counters, selectors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from preflab.aggregate import Feedback, IdentityAggregator
from preflab.errors import ConfigError, DataError
from preflab.kinds import PAIR
from preflab.records import Query, Segment
from preflab.reward import RewardConfig, RewardEnsemble
from preflab.reward.protocol import pair_variance
from preflab.selection.groupwise import GroupwiseConfig, GroupwiseSelector, candidate_groups
from preflab.selection.scoring import group_score
from preflab.sources.deciders import (
    DecisionConfig,
    DecisionMaker,
    InteractiveSelector,
    decide,
    decide_groups,
)
from preflab.testing.factories import make_segment


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@pytest.mark.parametrize(("gap", "sigma", "size"), [(1.0, 1.0, 1), (1.0, 2.0, 1), (1.0, 2.0, 4)])
def test_error_rate_follows_eq1(gap: float, sigma: float, size: int) -> None:
    """Perceived R + ε, ε ~ N(0, σ²) per behaviour: a wrong answer has probability
    Φ(−Δ / (σ·sqrt(2/size))) when every member of a side has the same true return."""
    rng = np.random.default_rng(0)
    cfg = DecisionConfig(noise_std=sigma, max_discordance=1.0)
    n = 8_000
    wrong = sum(decide(np.full(size, gap), np.zeros(size), cfg, rng)[0] == 0.0 for _ in range(n))
    expected = _phi(-gap / (sigma * math.sqrt(2.0 / size)))
    se = math.sqrt(expected * (1 - expected) / n)
    assert abs(wrong / n - expected) < 4 * se


def test_noiseless_answers_and_ties() -> None:
    rng = np.random.default_rng(1)
    cfg = DecisionConfig(noise_std=0.0)
    assert decide(np.array([2.0]), np.array([1.0]), cfg, rng) == (1.0, 0.0)
    assert decide(np.array([1.0]), np.array([2.0]), cfg, rng) == (0.0, 0.0)
    assert decide(np.array([1.0]), np.array([1.0]), cfg, rng)[0] == 0.5


def test_overlap_rule_is_explicit() -> None:
    rng = np.random.default_rng(2)
    a, b = np.array([1.0, 5.0]), np.array([2.0, 3.0])
    # mean 3 > 2.5: a wins; cross pairs against it: (1, 2), (1, 3) -> discordance 0.5
    assert decide(a, b, DecisionConfig(max_discordance=0.25), rng) == (None, 0.5)
    assert decide(a, b, DecisionConfig(max_discordance=0.5), rng) == (1.0, 0.5)
    assert decide(b, a, DecisionConfig(max_discordance=0.5), rng) == (0.0, 0.5)
    assert (
        decide(
            np.array([3.0, 4.0]), np.array([1.0, 2.0]), DecisionConfig(max_discordance=0.0), rng
        )[0]
        == 1.0
    )
    with pytest.raises(ConfigError):
        DecisionConfig(max_discordance=1.5)
    with pytest.raises(ConfigError):
        DecisionConfig(noise_std=-1.0)


def _segments(n: int, seed: int = 0) -> list[Segment]:
    """Behaviours in 4 families (levels of the observation); true return grows with the level."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        level = i % 4
        obs = (level + 0.05 * rng.normal(size=(12, 3))).astype(np.float32)
        acts = rng.normal(size=(12, 1)).astype(np.float32)
        rew = np.full(12, level + 0.01 * rng.normal(), np.float32)
        out.append(make_segment(obs=obs, acts=acts, true_rewards=rew))
    return out


def test_counters_match_the_labels_the_loop_will_make() -> None:
    segs = _segments(40)
    by_id = {s.id: s for s in segs}
    rng = np.random.default_rng(3)
    for kind in ("pairwise", "groupwise", "interactive"):
        dm = DecisionMaker(kind, DecisionConfig(noise_std=0.0), rng=np.random.default_rng(4))
        qs = dm.select(segs, None, 6, rng)
        assert qs
        dm.submit(qs, by_id)
        js = dm.collect()
        assert dm.collect() == []
        assert len(js) == len(qs)
        labels = IdentityAggregator().labels(Feedback(queries={q.id: q for q in qs}, judgements=js))
        assert dm.stats.labels == len(labels)
        assert dm.stats.comparisons == len(qs)  # skips happen while choosing, not answering
        wrong = sum(
            (lab.p > 0.5) != (by_id[lab.a].true_return > by_id[lab.b].true_return)
            for lab in labels
            if lab.p != 0.5
        )
        assert dm.stats.label_errors == wrong
        if kind != "pairwise":
            assert all(q.kind == "group" and 2 <= len(q.a) <= 8 and 2 <= len(q.b) <= 8 for q in qs)


def test_group_labels_err_less_than_pair_labels_at_equal_gap_and_noise() -> None:
    """Same true gap between the sides, same σ: a group answer averages the noise away."""
    segs = _segments(80, seed=5)
    by_id = {s.id: s for s in segs}
    level = {s.id: round(s.true_return / 12) for s in segs}
    fam = {k: [s.id for s in segs if level[s.id] == k] for k in range(4)}
    rng = np.random.default_rng(7)
    pairs, groups = [], []
    for _ in range(300):
        k = int(rng.integers(0, 3))
        hi, lo = rng.permutation(fam[k + 1]), rng.permutation(fam[k])
        pairs.append(PAIR.query(hi[0], lo[0]))
        groups.append(Query(id=f"g{len(groups)}", kind="group", a=tuple(hi[:4]), b=tuple(lo[:4])))
    dm_pair = DecisionMaker(
        "pairwise", DecisionConfig(noise_std=12.0), rng=np.random.default_rng(8)
    )
    dm_group = DecisionMaker(
        "groupwise", DecisionConfig(noise_std=12.0), rng=np.random.default_rng(8)
    )
    dm_pair.submit(pairs, by_id)
    dm_group.submit(groups, by_id)
    # P(pair wrong) = Φ(−12/(12·√2)) ≈ 0.24; a 4-vs-4 mean errs with Φ(−12/(12·√0.5)) ≈ 0.08
    assert dm_pair.stats.label_error_rate > 0.15
    assert dm_group.stats.label_error_rate < 0.12
    assert dm_group.stats.label_error_rate < dm_pair.stats.label_error_rate


def test_submit_rejects_rating_queries_and_unknown_segments() -> None:
    dm = DecisionMaker("pairwise", rng=np.random.default_rng(0))
    segs = _segments(4)
    with pytest.raises(DataError, match="pair and group"):
        dm.submit([Query(id="q", kind="rating", a=(segs[0].id,))], {s.id: s for s in segs})
    with pytest.raises(DataError, match="not passed"):
        dm.submit([PAIR.query(segs[0].id, "missing")], {s.id: s for s in segs})
    assert dm.collect() == []
    with pytest.raises(ConfigError, match="kind"):
        DecisionMaker("telepathic", rng=np.random.default_rng(0))


def test_groupwise_selector_asks_the_best_scoring_groups() -> None:
    segs = _segments(32, seed=8)
    ens = RewardEnsemble(3, 1, RewardConfig(members=3, hidden=(8,)), seed=1)
    qs = GroupwiseSelector().select(segs, ens, 1, np.random.default_rng(0))
    assert len(qs) == 1 and qs[0].kind == "group"
    from preflab.reward import SegmentBatch

    v = pair_variance(ens.segment_returns(SegmentBatch.from_segments(segs)))
    groups = candidate_groups(segs, 1, GroupwiseConfig())
    best = max(
        group_score(v, a, b)
        for i, a in enumerate(groups)
        for b in groups[i + 1 :]
        if not set(a) & set(b)
    )
    rows = {s.id: k for k, s in enumerate(segs)}
    got = group_score(v, [rows[x] for x in qs[0].a], [rows[x] for x in qs[0].b])
    assert got == pytest.approx(best)
    many = GroupwiseSelector().select(segs, ens, 5, np.random.default_rng(0))
    used = [frozenset(q.a) for q in many] + [frozenset(q.b) for q in many]
    assert len(used) == len(set(used))  # each group used once (max_node_uses = 1)


def test_interactive_selector_spreads_over_the_return_range() -> None:
    segs = _segments(64, seed=9)
    ret = {s.id: s.true_return for s in segs}
    qs = InteractiveSelector().select(segs, None, 6, np.random.default_rng(0))
    assert len(qs) >= 4
    means = [np.mean([ret[x] for x in side]) for q in qs for side in (q.a, q.b)]
    lo, hi = min(ret.values()), max(ret.values())
    assert min(means) < lo + 0.3 * (hi - lo) and max(means) > hi - 0.3 * (hi - lo)
    for q in qs:
        assert not set(q.a) & set(q.b)
    with pytest.raises(ConfigError):
        InteractiveSelector(gap_frac=0.0)


def _mixed_segments(n: int, seed: int = 0) -> list[Segment]:
    """Behaviours that look alike (one observation family) but whose returns differ widely, so
    tree groups mix returns and only editing makes them homogeneous."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        obs = (0.05 * rng.normal(size=(12, 3))).astype(np.float32)
        acts = rng.normal(size=(12, 1)).astype(np.float32)
        rew = np.full(12, rng.uniform(0, 10), np.float32)
        out.append(make_segment(obs=obs, acts=acts, true_rewards=rew))
    return out


def test_interactive_groups_are_edited_to_be_return_homogeneous() -> None:
    segs = _mixed_segments(60, seed=3)
    ret = {s.id: s.true_return for s in segs}
    span = max(ret.values()) - min(ret.values())
    sel = InteractiveSelector(max_spread_frac=0.2)
    qs = sel.select(segs, None, 5, np.random.default_rng(0))
    assert qs
    for q in qs:
        for side in (q.a, q.b):
            r = [ret[x] for x in side]
            assert 2 <= len(side) <= 8
            assert max(r) - min(r) <= 0.2 * span + 1e-9
    # the edit itself, by hand: the outlier (return 9) is removed; a group that cannot be made
    # homogeneous with ≥ 2 members is dropped; duplicates after editing are kept once
    returns = np.array([1.0, 1.1, 1.2, 9.0, 0.0, 5.0])
    edited = InteractiveSelector(max_spread_frac=0.1).edit_groups(
        [(0, 1, 2, 3), (4, 5), (2, 1, 0)], returns
    )
    assert edited == [(0, 1, 2)]


def test_interactive_skips_use_the_budget_unless_told_otherwise() -> None:
    """Default (paper 000's counts): a skipped comparison is one of the round's n_queries: it
    is asked and answered "can't tell" (p = None), so answered + skipped = n_queries queries.
    With skips_use_budget=False it is replaced and all n_queries are answered."""
    segs = _segments(64, seed=4)

    def dm(count: bool) -> DecisionMaker:
        return DecisionMaker(
            "interactive",
            DecisionConfig(noise_std=8.0, max_discordance=0.0),
            rng=np.random.default_rng(1),
            skips_use_budget=count,
        )

    counted = dm(True)
    qs = counted.select(segs, None, 4, np.random.default_rng(2))
    assert len(qs) == 4  # the skipped ones among them: the loop counts them as asked
    counted.submit(qs, {s.id: s for s in segs})
    skips = [j for j in counted.collect() if j.p is None]
    assert counted.stats.skipped == len(skips) > 0
    assert counted.stats.comparisons + counted.stats.skipped == 4
    dm = dm(False)
    qs = dm.select(segs, None, 4, np.random.default_rng(2))
    assert len(qs) == 4  # the budget is met with comparisons the person could decide
    assert dm.stats.skipped > 0  # ... although some were skipped on the way
    dm.submit(qs, {s.id: s for s in segs})
    js = dm.collect()
    assert [j.query_id for j in js] == [q.id for q in qs]
    assert all(j.p is not None for j in js)
    assert dm.stats.comparisons == 4
    # the answer given is the one settled on while choosing (also after a state round trip)
    dm2 = DecisionMaker(
        "interactive",
        DecisionConfig(noise_std=8.0, max_discordance=0.0),
        rng=np.random.default_rng(1),
        skips_use_budget=False,
    )
    qs2 = dm2.select(segs, None, 4, np.random.default_rng(2))
    state = dm2.state()
    dm3 = DecisionMaker(
        "interactive",
        DecisionConfig(noise_std=8.0, max_discordance=0.0),
        rng=np.random.default_rng(99),
    )
    dm3.load_state(state)
    dm3.submit(qs2, {s.id: s for s in segs})
    assert [j.p for j in dm3.collect()] == [j.p for j in js]


def test_groupwise_skip_replaced_when_skips_do_not_use_the_budget() -> None:
    """With skips_use_budget=False the active-learning DM replaces a comparison it cannot
    decide by the next suggestion."""
    segs = _mixed_segments(64, seed=6)
    ens = RewardEnsemble(3, 1, RewardConfig(members=3, hidden=(8,)), seed=2)
    dm = DecisionMaker(
        "groupwise",
        DecisionConfig(noise_std=4.0, max_discordance=0.25),
        rng=np.random.default_rng(3),
        max_group_uses=3,
        oversample=6,
        skips_use_budget=False,
    )
    qs = dm.select(segs, ens, 5, np.random.default_rng(4))
    assert len(qs) == 5 and dm.stats.skipped > 0
    dm.submit(qs, {s.id: s for s in segs})
    assert all(j.p is not None for j in dm.collect())
    assert dm.stats.comparisons == 5
    # without oversampling the same skips would have left the budget short
    short = DecisionMaker(
        "groupwise",
        DecisionConfig(noise_std=4.0, max_discordance=0.25),
        rng=np.random.default_rng(3),
        max_group_uses=3,
        oversample=1,
        skips_use_budget=False,
    )
    assert len(short.select(segs, ens, 5, np.random.default_rng(4))) < 5
    with pytest.raises(ConfigError, match="oversample"):
        DecisionMaker("groupwise", rng=np.random.default_rng(0), oversample=0)


def test_interactive_groups_may_be_reused_up_to_the_limit() -> None:
    """More comparisons than disjoint groups allow: a group is compared again, never beyond
    max_node_uses, and never the same two groups twice."""
    segs = _segments(24, seed=10)
    once = InteractiveSelector().select(segs, None, 40, np.random.default_rng(0))
    sel = InteractiveSelector(groups=GroupwiseConfig(max_node_uses=3))
    qs = sel.select(segs, None, 40, np.random.default_rng(0))
    assert len(qs) > len(once)
    counts: dict[tuple[str, ...], int] = {}
    for q in qs:
        for side in (q.a, q.b):
            counts[tuple(sorted(side))] = counts.get(tuple(sorted(side)), 0) + 1
    assert max(counts.values()) <= 3
    keys = [frozenset((tuple(sorted(q.a)), tuple(sorted(q.b)))) for q in qs]
    assert len(keys) == len(set(keys))


def test_border_rule_and_group_editing_by_hand() -> None:
    """Released code's user: border = midpoint of the two means; skip when more than half of a
    group lies beyond it; otherwise drop the members beyond it and answer about the rest."""
    rng = np.random.default_rng(0)
    cfg = DecisionConfig(overlap_rule="border", clean_groups=True)
    # means 4 and 1.5, border 2.75: a's 2.0 and b's 3.0 lie beyond it (1 of 3, 1 of 2)
    p, _disc, ka, kb = decide_groups(np.array([5.0, 5.0, 2.0]), np.array([0.0, 3.0]), cfg, rng)
    assert p == 1.0
    assert ka.tolist() == [True, True, False] and kb.tolist() == [True, False]
    # the same sides the other way round: same members kept, p flips
    p, _disc, kb2, ka2 = decide_groups(np.array([0.0, 3.0]), np.array([5.0, 5.0, 2.0]), cfg, rng)
    assert p == 0.0 and ka2.tolist() == ka.tolist() and kb2.tolist() == kb.tolist()
    # 2 of 3 of the winners beyond the border: skipped
    p, *_ = decide_groups(np.array([9.0, 1.0, 1.5]), np.array([0.0, 0.5, 2.0]), cfg, rng)
    assert p is None
    # pairs are never skipped and never edited
    p, _d, ka, kb = decide_groups(np.array([1.0]), np.array([2.0]), cfg, rng)
    assert p == 0.0 and ka.all() and kb.all()
    with pytest.raises(ConfigError, match="overlap_rule"):
        DecisionConfig(overlap_rule="vibes")  # type: ignore[arg-type]


def test_edited_groups_are_what_the_query_names_and_err_less() -> None:
    """With editing, the stored query names the kept members only, and its labels are wrong
    less often than the unedited groups' labels at the same noise."""
    segs = _mixed_segments(96, seed=11)
    by_id = {s.id: s for s in segs}
    rates = {}
    for clean in (False, True):
        cfg = DecisionConfig(noise_std=1.0, overlap_rule="border", clean_groups=clean)
        dm = DecisionMaker("interactive", cfg, rng=np.random.default_rng(5), max_group_uses=3)
        sel = dm.selector
        assert isinstance(sel, InteractiveSelector)
        qs = []
        for k in range(6):
            qs += dm.select(segs, None, 10, np.random.default_rng(k))
        dm.submit(qs, by_id)
        assert all(j.p is not None for j in dm.collect())
        if clean:
            assert any(q.meta.get("edited") for q in qs)
        rates[clean] = dm.stats.label_error_rate
    assert rates[True] < rates[False]


def test_the_interactive_person_edits_groups_by_what_they_perceive() -> None:
    """With perception noise the groups are edited and chosen by R + ε, not by the true
    returns: the selection differs from the noise-free one on the same RNG, and a decision
    maker passes its own σ to its selector."""
    segs = _mixed_segments(60, seed=3)
    clean = InteractiveSelector().select(segs, None, 5, np.random.default_rng(0))
    noisy = InteractiveSelector(noise_std=5.0).select(segs, None, 5, np.random.default_rng(0))
    assert [(q.a, q.b) for q in clean] != [(q.a, q.b) for q in noisy]
    dm = DecisionMaker("interactive", DecisionConfig(noise_std=3.0), rng=np.random.default_rng(0))
    assert isinstance(dm.selector, InteractiveSelector) and dm.selector.noise_std == 3.0


def test_the_border_rule_never_skips_groups_of_one_or_two() -> None:
    """A group's perceived mean lies on its own side of the midpoint, so more than half of a
    group of ≤ 2 can never be beyond it; from 3 members a skewed group can be."""
    rng = np.random.default_rng(5)
    cfg = DecisionConfig(noise_std=1.0, overlap_rule="border")
    for m, n in ((1, 2), (2, 2), (2, 1)):
        for _ in range(300):
            p, *_ = decide_groups(rng.normal(size=m), rng.normal(size=n), cfg, rng)
            assert p is not None
    skips = [
        decide_groups(rng.normal(size=3), rng.normal(size=3), cfg, rng)[0] is None
        for _ in range(300)
    ]
    assert 0.2 < np.mean(skips) < 0.5

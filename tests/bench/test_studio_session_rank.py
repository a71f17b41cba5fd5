"""The Rank-view session of ``preflab bench studio_session --view rank`` (issue 57): the Rank
person's error model (one pass of adjacent swaps whose expected pairwise label error is the
Compare person's rate), its label counting from a real SQLite store, and the verdict."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest

from preflab.kinds.ranking import RANKING
from preflab.records import Judgement, Query
from preflab.store import FeedbackStore
from preflab_bench._studio_person import SessionLog
from preflab_bench._studio_rank_person import (
    analyse_rank,
    noisy_ranks,
    pairs_of,
    ranking_label_errors,
    swap_p,
    wrong_pairs,
)
from preflab_bench._studio_session_report import _rank_section


def test_no_error_gives_the_true_order_and_ties_break_by_position() -> None:
    rng = np.random.default_rng(0)
    assert noisy_ranks([1.0, 9.0, 5.0, 3.0], 0.0, rng) == ((3, 0, 1, 2), 0)
    assert noisy_ranks([2.0, 2.0, 7.0], 0.0, rng) == ((1, 2, 0), 0)


@pytest.mark.parametrize("k", [3, 4, 6])
def test_every_swap_inverts_one_pair(k: int) -> None:
    rng = np.random.default_rng(k)
    scores = list(rng.normal(size=k))
    for _ in range(300):
        ranks, swaps = noisy_ranks(scores, 0.3, rng)
        assert sorted(ranks) == list(range(k))
        assert wrong_pairs(ranks, scores) == swaps


def test_the_pairwise_label_error_matches_the_compare_persons_rate() -> None:
    """q = error_p k / 2 makes the expected share of wrong pairs error_p: exactly (by summing
    over the 2^(k-1) swap patterns) and in a seeded sample."""
    for k in (3, 4, 5):
        q = swap_p(0.05, k)
        scores = [float(k - i) for i in range(k)]  # clip 0 best
        exact = 0.0
        for pattern in range(2 ** (k - 1)):
            bits = [(pattern >> b) & 1 for b in range(k - 1)]
            order = list(range(k))
            for pos, bit in enumerate(bits):
                if bit:
                    order[pos], order[pos + 1] = order[pos + 1], order[pos]
            ranks = [order.index(i) for i in range(k)]
            prob = float(np.prod([q if b else 1 - q for b in bits]))
            exact += prob * wrong_pairs(ranks, scores) / pairs_of(k)
        assert exact == pytest.approx(0.05)
    rng = np.random.default_rng(7)
    scores = [4.0, 1.0, 3.0, 2.0]
    wrong = sum(wrong_pairs(noisy_ranks(scores, 0.05, rng)[0], scores) for _ in range(20_000))
    assert wrong / (20_000 * 6) == pytest.approx(0.05, abs=0.004)
    assert swap_p(0.05, 4) == pytest.approx(0.10)
    assert swap_p(0.9, 8) == 1.0


def test_wrong_pairs_counts_no_tie_as_an_error() -> None:
    assert wrong_pairs((0, 1, 2), [3.0, 3.0, 1.0]) == 0
    assert wrong_pairs((0, 0, 1), [1.0, 3.0, 2.0]) == 1  # tie given: only (0, 2) is wrong
    assert max(wrong_pairs(p, [3.0, 2.0, 1.0, 0.0]) for p in permutations(range(4))) == 6


@pytest.fixture
def store(session_store: FeedbackStore) -> FeedbackStore:
    return session_store


def _answer(jid: str, q: str, ranks: list[int]) -> Judgement:
    p, meta = RANKING.answer(ranks, len(ranks))
    return Judgement(id=jid, query_id=q, annotator_id="pia", source="human", p=p, meta=meta)


def test_a_ranking_gives_six_labels_and_its_errors_are_counted(store: FeedbackStore) -> None:
    store.queries.add(
        [
            Query(id="r1", kind="ranking", a=("s3", "s0", "s7", "s5")),
            Query(id="r2", kind="ranking", a=("s1", "s2", "s6", "s4")),
            Query(id="r3", kind="ranking", a=("s0", "s1", "s2", "s3")),
            Query(id="p1", kind="pair", a=("s0",), b=("s1",)),
        ]
    )
    store.answers.add(
        [
            _answer("j1", "r1", [2, 3, 0, 1]),  # the true order: no error
            _answer("j2", "r2", [3, 2, 1, 0]),  # s6 and s4 swapped: one wrong pair
            _answer("j3", "r3", [0, 1, 2, 3]),  # all backwards: 6 wrong, but undone below
            Judgement(id="j4", query_id="p1", annotator_id="pia", source="human", p=0.0),
        ]
    )
    store.answers.retract("j3", "pia")
    wrong, labels, rankings = ranking_label_errors(store, "true", "Hopper-v5")
    assert (wrong, labels, rankings) == (1, 12, 2)  # the pair and the undone ranking left out
    log = SessionLog(t_open=0.0, t_end=60_000.0)  # one minute
    log.answers = [
        {"q": "r1", "think_s": 4.0, "wrong_pairs": 0, "pairs": 6},
        {"q": "r2", "think_s": 5.0, "wrong_pairs": 1, "pairs": 6},
        {"q": "r3", "think_s": 6.0, "wrong_pairs": 6, "pairs": 6},
    ]
    log.undos = [{"q": "r3", "ok": True}]
    log.visits = [
        {"q": "r1", "t_show": 0.0, "t_ready": 1500.0, "durations": [1.0] * 4, "spin": True},
        {"q": "r2", "t_show": 9000.0, "t_ready": 10_000.0, "durations": [1.0] * 4, "spin": False},
    ]
    row = analyse_rank(log, store, "true", "Hopper-v5")
    assert row["labels"] == 12 and row["rankings"] == 2
    assert row["labels_per_min"] == pytest.approx(12.0)
    assert row["answers_per_min"] == pytest.approx(2.0)
    assert row["label_error"] == pytest.approx(1 / 12)
    assert row["watch_s"] == pytest.approx(2.5)
    assert row["undos_ok"] == 1 and row["spinner_after_first"] == 0


def _rank_row(seed: int, per_min: float, wrong: int, labels: int) -> dict[str, object]:
    return {
        "arm": "rank",
        "seed": seed,
        "session_s": 300.0,
        "rankings": labels // 6,
        "labels": labels,
        "labels_per_answer": 6.0,
        "labels_per_min": per_min,
        "answers_per_min": per_min / 6,
        "label_error": wrong / labels,
        "label_errors": wrong,
        "watch_s": 50.0,
        "undos_ok": 1,
        "undos": 1,
        "nothing_offered_s": 0.0,
        "ended_by": "labels",
    }


def _pair_row(seed: int, per_min: float, wrong: int, kept: int) -> dict[str, object]:
    return {
        "arm": "studio",
        "seed": seed,
        "session_s": 200.0,
        "answers_kept": kept,
        "labels_per_min": per_min,
        "label_error": wrong / kept,
        "label_errors": wrong,
        "undos_ok": 1,
        "undos": 1,
        "empty_s": 0.0,
        "ended_by": "labels",
    }


def test_the_verdict_needs_3x_on_every_seed_and_no_higher_error() -> None:
    pairs = [_pair_row(s, 10.0 + s, 2, 40) for s in range(3)]  # top 12/min, 5 % error
    met = _rank_section([*pairs, *(_rank_row(10 + s, 37.0, 12, 240) for s in range(3))])
    assert "**met**" in met
    slow = _rank_section(
        [
            *pairs,
            _rank_row(10, 35.0, 12, 240),
            *(_rank_row(11 + s, 40.0, 12, 240) for s in range(2)),
        ]
    )
    assert "**missed**" in slow and "≥ 3× on every seed: no" in slow
    wrong = _rank_section([*pairs, *(_rank_row(10 + s, 40.0, 60, 240) for s in range(3))])
    assert "**missed**" in wrong and "error within: no" in wrong
    few = _rank_section([*pairs, _rank_row(10, 40.0, 12, 240)])
    assert "no verdict" in few


def test_no_pairwise_answers_kept_give_no_verdict_on_rank() -> None:
    """Pairwise sessions that kept no answers: the pairs' error is unknown, so no verdict and
    both error comparisons 'unknown' (not 'missed' from a NaN bound, nor 'met' from the whole
    [0, 1] that Wilson's interval of 0 of 0 is)."""
    empty = [{**_pair_row(s, 10.0 + s, 0, 1), "answers_kept": 0} for s in range(3)]
    md = _rank_section([*empty, *(_rank_row(10 + s, 37.0, 12, 240) for s in range(3))])
    assert "**no verdict (no pairwise answers kept" in md
    assert "error within: unknown" in md and "point estimate: unknown" in md
    assert "**met**" not in md and "**missed**" not in md

"""expand: counts, coverage, crossing, provenance, product option, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.aggregate import Feedback, IdentityAggregator
from preflab.errors import DataError
from preflab.kinds.group import expand
from preflab.records import Judgement, Query


def _groups(m: int, n: int) -> tuple[list[str], list[str]]:
    return [f"a{i}" for i in range(m)], [f"b{j}" for j in range(n)]


@pytest.mark.parametrize("m", range(1, 9))
@pytest.mark.parametrize("n", range(1, 9))
def test_counts_coverage_crossing(m: int, n: int) -> None:
    ga, gb = _groups(m, n)
    labels = expand(ga, gb, 0.8, np.random.default_rng(m * 10 + n), judgement_id="j-1")
    assert len(labels) == max(m, n)
    assert {lab.a for lab in labels} == set(ga)  # every member of both groups in ≥ 1 pair
    assert {lab.b for lab in labels} == set(gb)
    assert all(lab.a in ga and lab.b in gb for lab in labels)  # each pair crosses the groups
    assert all(lab.p == 0.8 and lab.judgement_ids == ("j-1",) for lab in labels)
    assert len({(lab.a, lab.b) for lab in labels}) == len(labels)  # no pair twice
    # the smaller side is used as evenly as possible
    small = [lab.a for lab in labels] if m <= n else [lab.b for lab in labels]
    counts = np.unique(small, return_counts=True)[1]
    assert counts.max() - counts.min() <= 1


def test_product_option_gives_all_pairs() -> None:
    ga, gb = _groups(3, 4)
    labels = expand(ga, gb, 0.0, np.random.default_rng(0), product=True)
    assert len(labels) == 12
    assert {(lab.a, lab.b) for lab in labels} == {(a, b) for a in ga for b in gb}
    assert all(lab.judgement_ids == () for lab in labels)


def test_deterministic_given_rng_and_random_across_seeds() -> None:
    ga, gb = _groups(3, 7)
    one = [(x.a, x.b) for x in expand(ga, gb, 1.0, np.random.default_rng(5))]
    two = [(x.a, x.b) for x in expand(ga, gb, 1.0, np.random.default_rng(5))]
    assert one == two
    seen = {
        tuple((x.a, x.b) for x in expand(ga, gb, 1.0, np.random.default_rng(s))) for s in range(20)
    }
    assert len(seen) > 1


def test_identity_aggregator_expands_group_judgements() -> None:
    q = Query(id="q-1", kind="group", a=("a0", "a1", "a2"), b=("b0", "b1"))
    j = Judgement(id="j-9", query_id="q-1", annotator_id="x", source="synthetic", p=1.0)
    labels = IdentityAggregator().labels(Feedback(queries={q.id: q}, judgements=[j]))
    assert len(labels) == 3
    assert all(lab.judgement_ids == ("j-9",) for lab in labels)
    assert labels == IdentityAggregator().labels(
        Feedback(queries={q.id: q}, judgements=[j])
    )  # reproducible from the query id


@pytest.mark.parametrize(
    ("ga", "gb", "p", "match"),
    [
        ([], ["b"], 1.0, "empty"),
        (["a"], [], 1.0, "empty"),
        (["a", "x"], ["x", "b"], 1.0, "both groups"),
        (["a", "a"], ["b"], 1.0, "more than once"),
        ([f"a{i}" for i in range(9)], ["b"], 1.0, "limit of 8"),
        (["a"], ["b"], 1.5, r"\[0, 1\]"),
        (["a"], ["b"], float("nan"), r"\[0, 1\]"),
    ],
)
def test_bad_input(ga: list[str], gb: list[str], p: float, match: str) -> None:
    with pytest.raises(DataError, match=match):
        expand(ga, gb, p, np.random.default_rng(0))


def test_limit_can_be_raised() -> None:
    ga, gb = _groups(12, 2)
    assert len(expand(ga, gb, 1.0, np.random.default_rng(0), max_size=None)) == 12

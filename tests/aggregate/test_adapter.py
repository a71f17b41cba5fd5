import numpy as np
import pytest

from preflab.aggregate import (
    CrowdAggregator,
    Feedback,
    MajorityAggregator,
    SMLAggregator,
    majority,
    sml,
    votes_table,
)
from preflab.errors import ConfigError, DataError
from preflab.testing.factories import make_judgement, make_query


def test_labels_keep_provenance_ties_skips_and_latest_answer():
    queries = {f"q{k}": make_query(f"q{k}", f"a{k}", f"b{k}") for k in range(4)}
    js = [
        make_judgement("j1", "q0", "u1", 1.0, source="crowd"),
        make_judgement("j2", "q0", "u2", 1.0, source="crowd"),
        make_judgement("j3", "q0", "u3", 0.0, source="crowd"),
        make_judgement("j4", "q1", "u1", 0.0, source="crowd"),
        make_judgement("j5", "q1", "u2", 1.0, source="crowd"),  # tie → 0.5
        make_judgement("j6", "q2", "u1", None, source="crowd"),
        make_judgement("j7", "q2", "u2", 0.5, source="crowd"),  # no ±1 answer → no label
        make_judgement("j8", "q3", "u1", 1.0, source="crowd", created_at=1.0),
        make_judgement("j9", "q3", "u1", 0.0, source="crowd", created_at=2.0),  # correction wins
    ]
    labels = MajorityAggregator().labels(Feedback(queries=queries, judgements=js))
    by_a = {lab.a: lab for lab in labels}
    assert set(by_a) == {"a0", "a1", "a3"}
    assert by_a["a0"].p == 1.0 and by_a["a0"].judgement_ids == ("j1", "j2", "j3")
    assert by_a["a1"].p == 0.5
    assert by_a["a3"].p == 0.0 and by_a["a3"].judgement_ids == ("j8", "j9")


def test_sml_adapter_equals_sml_on_the_votes_matrix():
    rng = np.random.default_rng(0)
    n_ann, n_q = 7, 80
    acc = rng.uniform(0.55, 0.95, n_ann)
    y = rng.choice([-1, 1], n_q)
    votes = np.where(rng.random((n_ann, n_q)) < acc[:, None], y, -y)
    votes[rng.random(votes.shape) < 0.3] = 0
    queries = {f"q{k:03d}": make_query(f"q{k:03d}", f"a{k}", f"b{k}") for k in range(n_q)}
    js = [
        make_judgement(
            f"j{i}-{k}", f"q{k:03d}", f"u{i}", 1.0 if votes[i, k] > 0 else 0.0, source="crowd"
        )
        for k in range(n_q)
        for i in range(n_ann)
        if votes[i, k] != 0
    ]
    agg = SMLAggregator()
    labels = agg.labels(Feedback(queries=queries, judgements=js))
    table = votes_table(js, queries)
    assert table.annotator_ids == tuple(f"u{i}" for i in range(n_ann))
    expected = sml(votes).labels
    answered = (votes != 0).any(0)
    got = {lab.a: lab.p for lab in labels}
    for k in np.flatnonzero(answered):
        assert got[f"a{k}"] == (1.0 if expected[k] > 0 else 0.0)
    assert agg.last_sml is not None


def test_sml_falls_back_to_majority_below_three_annotators_unless_strict():
    queries = {"q": make_query("q")}
    js = [
        make_judgement("j1", "q", "u1", 1.0, source="crowd"),
        make_judgement("j2", "q", "u2", 1.0, source="crowd"),
    ]
    assert SMLAggregator().labels(Feedback(queries=queries, judgements=js))[0].p == 1.0
    with pytest.raises(DataError, match="at least 3"):
        SMLAggregator(strict=True).labels(Feedback(queries=queries, judgements=js))
    assert majority(np.array([[1], [1]]))[0] == 1


def test_bad_method_and_unknown_query():
    with pytest.raises(ConfigError):
        CrowdAggregator("mean")
    with pytest.raises(DataError, match="unknown query"):
        SMLAggregator().labels(
            Feedback(queries={}, judgements=[make_judgement("j1", "q", "u1", 1.0, source="crowd")])
        )

import numpy as np
import pytest

from preflab.aggregate import Feedback, IdentityAggregator
from preflab.errors import DataError
from preflab.kinds import PAIR
from preflab.records import Judgement, Label, Query, Rating, Segment
from preflab.testing.factories import random_segment


def test_segment_validates_shapes_and_nan() -> None:
    with pytest.raises(DataError, match="obs must have shape"):
        Segment(id="x", obs=np.zeros(3), acts=np.zeros((3, 1)), true_rewards=np.zeros(3))
    with pytest.raises(DataError, match="acts must have shape"):
        Segment(id="x", obs=np.zeros((3, 2)), acts=np.zeros((4, 1)), true_rewards=np.zeros(3))
    bad = np.zeros((3, 2))
    bad[1, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        Segment(id="x", obs=bad, acts=np.zeros((3, 1)), true_rewards=np.zeros(3))
    with pytest.raises(DataError, match="NaN"):
        Segment(
            id="x",
            obs=np.zeros((3, 2)),
            acts=np.zeros((3, 1)),
            true_rewards=np.array([0, np.inf, 0]),
        )


def test_label_range_and_self_comparison() -> None:
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        Label(a="a", b="b", p=1.5)
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        Label(a="a", b="b", p=float("nan"))
    with pytest.raises(DataError, match="itself"):
        Label(a="a", b="a", p=1.0)
    assert Label(a="a", b="b", p=0.5).p == 0.5


def test_query_validation() -> None:
    """The record checks what every kind shares; each kind's shape: tests/kinds."""
    with pytest.raises(DataError, match="both sides"):
        Query(id="q", kind="group", a=("x", "y"), b=("y",))
    with pytest.raises(DataError, match="side a is empty"):
        Query(id="q", kind="pair", a=(), b=("z",))
    with pytest.raises(DataError, match="kind"):
        Query(id="q", kind="", a=("x",), b=("z",))


def test_rating_range() -> None:
    with pytest.raises(DataError, match=r"\[-1, 1\]"):
        Rating(annotator_id="a", stream_id="s", step=0, t=0.0, value=1.2)


def test_identity_labels_skip_cant_tell_and_keep_provenance() -> None:
    q1, q2 = PAIR.query("a", "b"), PAIR.query("c", "d")
    js = [
        Judgement(id="j1", query_id=q1.id, annotator_id="h", source="human", p=0.0),
        Judgement(id="j2", query_id=q2.id, annotator_id="h", source="human", p=None),
    ]
    labels = IdentityAggregator().labels(Feedback(queries={q1.id: q1, q2.id: q2}, judgements=js))
    assert [(lab.a, lab.b, lab.p, lab.judgement_ids) for lab in labels] == [
        ("a", "b", 0.0, ("j1",))
    ]
    with pytest.raises(DataError, match="unknown query"):
        IdentityAggregator().labels(Feedback(queries={}, judgements=js[:1]))


def test_content_id_is_content_addressed() -> None:
    s = random_segment(np.random.default_rng(1), id="s1", length=4, obs_dim=3)
    assert Segment.content_id(s.obs, s.acts) == Segment.content_id(s.obs.copy(), s.acts.copy())
    assert Segment.content_id(s.obs, s.acts) != Segment.content_id(s.obs + 1, s.acts)

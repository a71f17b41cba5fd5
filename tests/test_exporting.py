import numpy as np
import pytest

from preflab.errors import DataError
from preflab.exporting import export_run, p_from_bpref, p_from_signed, p_to_signed, read_export
from preflab.records import Judgement, Query, Segment
from preflab.store import FeedbackStore


def test_round_trip_keeps_arrays_provenance_and_labels(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    rng = np.random.default_rng(0)
    segs = [
        Segment(
            id=f"s{i}",
            obs=rng.normal(size=(3 + i, 2)),
            acts=rng.normal(size=(3 + i, 1)),
            true_rewards=rng.normal(size=3 + i),
            env_id="E",
            episode=i,
        )
        for i in range(3)
    ]
    store.add_segments(segs)
    q1, q2 = Query.pair("s0", "s1", selector="random"), Query.pair("s1", "s2")
    store.add_queries([q1, q2])
    store.add_judgements(
        [
            Judgement(
                id="j1",
                query_id=q1.id,
                annotator_id="ann",
                source="human",
                p=0.0,
                response_time_s=2.5,
                meta={"ui": "pair"},
            ),
            Judgement(id="j2", query_id=q2.id, annotator_id="ann", source="human", p=None),
        ]
    )
    counts = export_run(store, tmp_path / "exp")
    assert counts == {"segments": 3, "queries": 2, "judgements": 2, "labels": 1}
    data = read_export(tmp_path / "exp")
    by_id = {s.id: s for s in data.segments}
    for s in segs:  # variable lengths come back unpadded
        np.testing.assert_array_equal(by_id[s.id].obs, s.obs)
        np.testing.assert_array_equal(by_id[s.id].true_rewards, s.true_rewards)
    (lab,) = data.labels
    assert (lab.a, lab.b, lab.p, lab.judgement_ids) == ("s0", "s1", 0.0, ("j1",))
    assert {j.id: j.p for j in data.judgements} == {"j1": 0.0, "j2": None}
    assert data.judgements[0].meta == {"ui": "pair"} and data.queries[0].meta == {
        "selector": "random"
    }


def test_reading_something_else_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(DataError, match="not a PrefLab export"):
        read_export(tmp_path)


def test_label_convention_converters() -> None:
    np.testing.assert_array_equal(p_from_signed(np.array([1, 0, -1])), [1.0, 0.5, 0.0])
    np.testing.assert_array_equal(p_to_signed(np.array([1.0, 0.5, 0.0])), [1, 0, -1])
    np.testing.assert_array_equal(p_from_bpref(np.array([1.0, 0.5, 0.0])), [0.0, 0.5, 1.0])
    with pytest.raises(DataError):
        p_from_signed(np.array([2]))

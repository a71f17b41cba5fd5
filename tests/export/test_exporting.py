import numpy as np
import pytest

from preflab.errors import DataError
from preflab.export.feedback import (
    export_run,
    p_from_bpref,
    p_from_signed,
    p_to_signed,
    read_export,
)
from preflab.kinds import PAIR
from preflab.records import Judgement, Query
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments, random_segment


def test_round_trip_keeps_arrays_provenance_and_labels(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    rng = np.random.default_rng(0)
    segs = [random_segment(rng, id=f"s{i}", length=3 + i, env_id="E", episode=i) for i in range(3)]
    store.segments.add(segs)
    q1, q2 = PAIR.query("s0", "s1", selector="random"), PAIR.query("s1", "s2")
    store.queries.add([q1, q2])
    store.answers.add(
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
    assert counts == {
        "segments": 3,
        "queries": 2,
        "judgements": 2,
        "answers": 1,
        "labels": 1,
        "ratings": 0,
        "annotators": 1,  # not registered in the store, but it answered
    }
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


def full_store(store: FeedbackStore) -> None:
    from preflab.records import Annotator, Rating

    segs = make_segments(4, rng=np.random.default_rng(3), episode=range(4), round=[0, 1, 0, 1])
    store.segments.add(segs)
    qs = [
        PAIR.query(segs[0].id, segs[1].id),
        Query(id="grp", kind="group", a=(segs[0].id, segs[1].id), b=(segs[2].id,)),
        Query(id="stream", kind="rating", a=(segs[2].id, segs[3].id), b=()),
    ]
    store.queries.add(qs)
    store.annotators.add(
        Annotator(id="ann", source="human", name="Ann", meta={"role": "owner"}), token="tok"
    )
    store.annotators.add(Annotator(id="bob", source="human", name="Bob"))
    store.answers.add(
        [
            Judgement(id="j1", query_id=qs[0].id, annotator_id="ann", source="human", p=1.0),
            Judgement(id="j2", query_id="grp", annotator_id="bob", source="human", p=0.0),
            Judgement(id="j3", query_id=qs[0].id, annotator_id="bob", source="human", p=0.5),
            Judgement(id="j4", query_id=qs[0].id, annotator_id="ann", source="human", p=None),
        ]
    )
    store.ratings.add(
        [
            Rating(annotator_id="ann", stream_id="stream", step=k, t=0.1 * k, value=-0.5 + 0.1 * k)
            for k in range(6)
        ]
    )


def test_export_import_round_trip_gives_the_same_labels(tmp_path) -> None:
    from preflab.export.feedback import identity_labels, import_export

    src = FeedbackStore(tmp_path / "a" / "feedback.db")
    full_store(src)
    export_run(src, tmp_path / "exp")
    dst = FeedbackStore(tmp_path / "b" / "feedback.db")
    counts = import_export(tmp_path / "exp", dst)
    assert counts["judgements"] == 4 and counts["ratings"] == 6 and counts["annotators"] == 2

    def labels(s):
        return identity_labels(s.queries.all(), [j for _q, j in s.answers.judgements()])

    assert labels(dst) == labels(src) and len(labels(src)) > 0
    assert {q.kind for q in dst.queries.all()} == {"pair", "group", "rating"}
    assert dst.ratings.all() == src.ratings.all()
    assert {a.id: a.meta for a in dst.annotators.all()} == {"ann": {"role": "owner"}, "bob": {}}
    assert dst.annotators.id_for_token("tok") is None  # token hashes are never exported
    assert [j for _s, j in dst.answers.judgements()] == [j for _s, j in src.answers.judgements()]
    # importing again changes nothing
    again = import_export(tmp_path / "exp", dst)
    assert again["judgements"] == 0 and again["ratings"] == 0 and dst.answers.count() == 4


@pytest.mark.parametrize(
    "name", ["segments.npz", "judgements.parquet", "manifest.json", "annotators.parquet"]
)
def test_check_refuses_truncated_and_tampered_exports(tmp_path, name) -> None:
    from preflab.cli.main import main

    src = FeedbackStore(tmp_path / "a" / "feedback.db")
    full_store(src)
    export_run(src, tmp_path / "exp")
    assert main(["export", "--check", str(tmp_path / "exp")]) == 0
    path = tmp_path / "exp" / name
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    assert main(["export", "--check", str(tmp_path / "exp")]) == 1
    path.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    assert main(["export", "--check", str(tmp_path / "exp")]) == 1


def test_export_refuses_a_folder_that_holds_something_else(tmp_path, capsys) -> None:
    from preflab.cli.main import main

    src = FeedbackStore(tmp_path / "a" / "feedback.db")
    full_store(src)
    src.close()
    # e.g. --out RUN/checkpoints/ckpt-00003: its manifest.json is a checkpoint's, not an export's
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "manifest.json").write_text('{"step": 3}')
    (ckpt / "policy.zip").write_bytes(b"weights")
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}
    assert main(["export", str(tmp_path / "a"), "--out", str(ckpt)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"preflab export: error: {ckpt} is a folder that is not empty")
    assert "pick a new or empty folder" in err and len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before  # nothing replaced
    # a new folder, an empty one, and a previous export (exported again) are all fine
    (tmp_path / "empty").mkdir()
    for out in ("new", "empty", "new"):
        assert main(["export", str(tmp_path / "a"), "--out", str(tmp_path / out)]) == 0
        assert read_export(tmp_path / out).judgements

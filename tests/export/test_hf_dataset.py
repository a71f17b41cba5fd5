"""An export as a Hugging Face dataset (issue #29): the card, datasets.load_dataset on the
directory, preflab.export.hf_dataset.load, and the round trip into a new store."""

from pathlib import Path

import numpy as np
import pytest

from preflab.errors import DataError
from preflab.export.feedback import export_run, import_export, read_export
from preflab.export.hf_dataset import load
from preflab.store import FeedbackStore
from tests.export.test_exporting import full_store


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    store = FeedbackStore(tmp_path / "f.db")
    full_store(store)
    export_run(store, tmp_path / "exp", source_run="runs/demo")
    store.close()
    return tmp_path / "exp"


def test_the_card_names_every_table_and_what_the_data_is(exported: Path) -> None:
    card = (exported / "README.md").read_text()
    front = card.split("---")[1]
    for t in ("segments", "queries", "judgements", "answers", "labels", "ratings", "annotators"):
        assert f"- config_name: {t}\n  data_files: {t}.parquet" in front
    assert "license: other" in front
    assert "p = P(a ≻ b)" in card and "runs/demo" in card and "PrefLab" in card
    assert "ann" in card  # the pseudonymous annotator id, never a token


def test_datasets_loads_each_table_from_the_directory(exported: Path) -> None:
    import datasets  # here, not at collection: ~0.7 s of CPU in every xdist worker

    labels = datasets.load_dataset(str(exported), "labels", split="train")
    want = read_export(exported).labels
    assert [(r["a"], r["b"], r["p"]) for r in labels] == [(x.a, x.b, x.p) for x in want]


def test_load_gives_every_table_and_the_segments_arrays(exported: Path) -> None:
    dd = load(exported)
    assert set(dd) == {
        "segments", "queries", "judgements", "answers", "labels", "ratings", "annotators"
    }  # fmt: skip
    data = read_export(exported)
    by_id = {s.id: s for s in data.segments}
    for row in dd["segments"]:
        seg = by_id[row["id"]]
        np.testing.assert_allclose(np.array(row["obs"]), seg.obs, rtol=1e-6)
        np.testing.assert_allclose(np.array(row["true_rewards"]), seg.true_rewards, rtol=1e-6)
        assert len(row["acts"]) == seg.length
    assert len(dd["judgements"]) == len(data.judgements)


def test_round_trip_into_a_new_store_gives_the_same_labels(exported: Path, tmp_path: Path) -> None:
    """export → load with datasets → import into a new store → export again: the same labels."""
    dd = load(exported)
    fresh = FeedbackStore(tmp_path / "g.db")
    import_export(exported, fresh)
    export_run(fresh, tmp_path / "again")
    fresh.close()
    again = load(tmp_path / "again")
    key = lambda d: sorted((r["a"], r["b"], r["p"]) for r in d)  # noqa: E731
    assert key(again["answers"]) == key(dd["answers"])


def test_load_refuses_a_folder_that_is_no_export(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a PrefLab export"):
        load(tmp_path)


def test_two_exports_in_folders_of_the_same_name_each_load_as_themselves(tmp_path: Path) -> None:
    """datasets caches a local folder under its name and its card; two different exports both
    called ``export`` (loaded one after the other, the cache warm) must give their own rows."""
    import datasets

    from preflab.records import Judgement

    dirs = []
    for run, extra in (("a", 0), ("b", 3)):
        store = FeedbackStore(tmp_path / f"{run}.db")
        full_store(store)
        qid = store.queries.all()[0].id
        store.answers.add(
            Judgement(id=f"x{k}", query_id=qid, annotator_id="bob", source="human", p=0.0)
            for k in range(extra)
        )
        export_run(store, tmp_path / run / "export")
        store.close()
        dirs.append(tmp_path / run / "export")
    cache = tmp_path / "hf-cache"  # shared by both loads, as a user's is
    for _ in range(2):  # the second pass reads from a warm cache
        for d in dirs:
            want = read_export(d)
            got = datasets.load_dataset(str(d), "judgements", split="train", cache_dir=str(cache))
            assert sorted(got["id"]) == sorted(j.id for j in want.judgements)
            assert sorted(load(d)["judgements"]["id"]) == sorted(j.id for j in want.judgements)
    assert len(read_export(dirs[1]).judgements) == len(read_export(dirs[0]).judgements) + 3


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("segments.parquet", Path.unlink),
        ("judgements.parquet", _truncate),
        ("segments.npz", _truncate),
        ("segments.npz", lambda p: p.write_bytes(b"")),
    ],
    ids=["parquet missing", "parquet truncated", "npz truncated", "npz empty"],
)
def test_load_refuses_a_damaged_export_naming_the_file(exported: Path, name: str, damage) -> None:
    damage(exported / name)
    with pytest.raises(DataError, match=name.replace(".", r"\.")):
        load(exported)


def test_load_gives_a_table_without_rows_as_an_empty_split_with_its_columns(
    tmp_path: Path,
) -> None:
    from preflab.kinds import PAIR
    from preflab.records import Judgement
    from preflab.testing.factories import make_segments

    store = FeedbackStore(tmp_path / "f.db")  # answers, no ratings
    segs = make_segments(2, rng=np.random.default_rng(0), length=3)
    store.segments.add(segs)
    q = PAIR.query(segs[0].id, segs[1].id)
    store.queries.add([q])
    store.answers.add([Judgement(id="j", query_id=q.id, annotator_id="t", source="human", p=1.0)])
    export_run(store, tmp_path / "no-ratings")
    store.close()
    empty = FeedbackStore(tmp_path / "empty.db")
    export_run(empty, tmp_path / "empty")
    empty.close()
    dd = load(tmp_path / "no-ratings")
    assert len(dd["ratings"]) == 0 and len(dd["judgements"]) == 1 and len(dd["segments"]) == 2
    assert dd["ratings"].column_names == ["annotator_id", "stream_id", "step", "t", "value"]
    nothing = load(tmp_path / "empty")
    assert len(nothing) == 7 and all(len(nothing[t]) == 0 for t in nothing)
    assert nothing["segments"].column_names[-3:] == ["obs", "acts", "true_rewards"]

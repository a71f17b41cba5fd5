"""Export and crowd agree: a crowd run's export holds one label per answer (answers.parquet),
the labels the run trained on (labels.parquet) and the simulated users as annotators, and
``preflab crowd aggregate`` reads that export back into the labels the run trained on."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from preflab.aggregate import Feedback, SMLAggregator
from preflab.cli.main import main
from preflab.config import TrainConfig
from preflab.crowd import CrowdConfig
from preflab.export.feedback import export_run, read_export
from preflab.kinds import PAIR
from preflab.records import Annotator, Judgement, Label
from preflab.runs import train
from preflab.store import FeedbackStore
from preflab.studio import create_app
from preflab.testing.factories import make_segments

OWNER = "owner-token-123456"


class RecordingAggregator:
    """The run's SML aggregator, keeping the labels of the latest fit (what it trained on)."""

    def __init__(self) -> None:
        self.inner = SMLAggregator()
        self.last: list[Label] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def labels(self, feedback: Feedback) -> list[Label]:
        self.last = self.inner.labels(feedback)
        return self.last


def _aggregated(out: Path) -> dict[tuple[str, str], float]:
    with (out / "labels.csv").open() as f:
        return {(r["a"], r["b"]): float(r["p"]) for r in csv.DictReader(f)}


def test_crowd_run_export_aggregates_back_to_the_labels_it_trained_on(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    config = TrainConfig.smoke(source="crowd", total_steps=400, crowd=CrowdConfig(n_users=7))
    recorder = RecordingAggregator()
    result = train(config, run_dir=run, aggregator=recorder)
    trained = {(lab.a, lab.b): lab.p for lab in recorder.last}
    assert len(trained) == result.n_labels > 0

    assert main(["export", str(run)]) == 0
    printed = capsys.readouterr().out
    data = read_export(run / "export")
    assert data.labels_aggregator == "sml"
    assert {(lab.a, lab.b): lab.p for lab in data.labels} == trained
    assert len(data.answers) == len(data.judgements) == result.n_judgements
    assert f"{len(trained)} labels" in printed and "7 annotators" in printed
    users = {a.id: a for a in data.annotators}
    assert sorted(users) == [f"user-{i:03d}" for i in range(7)]
    assert {j.annotator_id for j in data.judgements} == set(users)
    assert all(a.source == "crowd" and 0.1 <= a.meta["beta"] <= 10 for a in users.values())
    manifest = json.loads((run / "export" / "manifest.json").read_text())
    assert manifest["version"] == 3 and manifest["labels"]["aggregator"] == "sml"

    assert main(["export", "--check", str(run / "export")]) == 0
    assert "labels trained on (sml" in capsys.readouterr().out

    # the export directory and its judgements.parquet both aggregate to the trained-on labels
    assert main(["crowd", "aggregate", str(run / "export"), "--show", "0"]) == 0
    assert _aggregated(run / "export-aggregate") == trained
    parquet = run / "export" / "judgements.parquet"
    assert main(["crowd", "aggregate", str(parquet), "--out", str(tmp_path / "o")]) == 0
    assert _aggregated(tmp_path / "o") == trained
    # an export's answers are p = P(a ≻ b): --answers vote is refused, in CLI terms
    capsys.readouterr()
    assert main(["crowd", "aggregate", str(run / "export"), "--answers", "vote"]) == 1
    assert "drop --answers vote" in capsys.readouterr().err

    # the studio's owner export of the run is the same export: same labels, same annotators
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    store.annotators.add(
        Annotator(id="olivia", source="human", name="olivia", meta={"role": "owner"}), token=OWNER
    )
    with TestClient(create_app(store, static_dir=tmp_path / "static", run_dir=run)) as client:
        r = client.get("/api/owner/export", headers={"Authorization": f"Bearer {OWNER}"})
    store.close()
    assert r.status_code == 200
    with zipfile.ZipFile(io.BytesIO(r.content)) as zf:
        zf.extractall(tmp_path / "studio")
    studio = read_export(tmp_path / "studio" / "preflab-export")
    assert {(lab.a, lab.b): lab.p for lab in studio.labels} == trained
    assert {a.id for a in studio.annotators} >= set(users)


def test_version_2_export_reads_its_labels_as_answers_too(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    store.segments.add(make_segments(2, rng=np.random.default_rng(0), length=3, id_prefix="s"))
    q = PAIR.query("s0", "s1")
    store.queries.add([q])
    store.answers.add(
        [Judgement(id="j", query_id=q.id, annotator_id="t", source="synthetic", p=1.0)]
    )
    export_run(store, tmp_path / "e")
    manifest_path = tmp_path / "e" / "manifest.json"
    m = json.loads(manifest_path.read_text())
    (tmp_path / "e" / "answers.parquet").unlink()  # what version 2 wrote
    m["version"] = 2
    del m["sha256"]["answers.parquet"], m["counts"]["answers"], m["labels"]
    manifest_path.write_text(json.dumps(m))
    data = read_export(tmp_path / "e")
    assert data.answers == data.labels and [lab.p for lab in data.labels] == [1.0]
    assert data.labels_aggregator == "identity"
    assert [(a.id, a.source) for a in data.annotators] == [("t", "synthetic")]

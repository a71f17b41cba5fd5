"""``preflab export`` and the studio's owner export are one export: on a run with undone
judgements both leave them out and compute the same labels from the judgements that count."""

import io
import json
import zipfile
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from preflab.cli.main import main
from preflab.export.feedback import read_export
from preflab.records import Annotator, Judgement, Query, Rating
from preflab.store import FeedbackStore
from preflab.studio import create_app
from preflab.testing.factories import make_segments

OWNER, ALICE = "owner-token-123456", "alice-token-123456"


def _run_store(run: Path) -> FeedbackStore:
    """A run store with segments, three pair queries, a rating stream, a teacher's judgements
    and two studio users."""
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    rng = np.random.default_rng(3)
    segs = make_segments(6, rng=rng, length=4, id_prefix="s", env_id="E", episode=range(6))
    store.segments.add(segs)
    store.queries.add(
        [
            Query(id="q1", kind="pair", a=("s0",), b=("s1",), round=1),
            Query(id="q2", kind="pair", a=("s2",), b=("s3",), round=1),
            Query(id="q3", kind="pair", a=("s4",), b=("s5",), round=1),
            Query(id="r1", kind="rating", a=("s0", "s1"), round=1),
        ]
    )
    store.answers.add(
        [
            Judgement(id="t-q2", query_id="q2", annotator_id="teacher", source="synthetic", p=0.0),
            Judgement(id="t-q3", query_id="q3", annotator_id="teacher", source="synthetic", p=1.0),
        ]
    )
    store.ratings.add([Rating(annotator_id="alice", stream_id="r1", step=2, t=0.4, value=0.5)])
    for who, tok, role in (("owner", OWNER, "owner"), ("alice", ALICE, "annotator")):
        store.annotators.add(
            Annotator(id=who, source="human", name=who, meta={"role": role}), token=tok
        )
    return store


def _answer(client: TestClient, qid: str, p: float | None, key: str) -> str:
    r = client.post(
        "/api/judgements",
        json={"query_id": qid, "p": p, "client_key": key, "response_time_s": 1.0},
        headers={"Authorization": f"Bearer {ALICE}"},
    )
    assert r.status_code == 201, r.text
    return str(r.json()["judgement_id"])


def test_cli_and_studio_exports_agree_and_leave_undone_judgements_out(tmp_path) -> None:
    run = tmp_path / "run"
    store = _run_store(run)
    app = create_app(store, static_dir=tmp_path / "static")
    with TestClient(app) as client:
        undone = [_answer(client, "q1", 1.0, "key-first"), _answer(client, "q3", 0.0, "key-q3-00")]
        for jid in undone:  # alice undoes both answers through the studio
            r = client.delete(
                f"/api/judgements/{jid}", headers={"Authorization": f"Bearer {ALICE}"}
            )
            assert r.status_code == 200 and r.json() == {"undone": True}
        again = _answer(client, "q1", 0.0, "key-second")  # ...and answers q1 again, the other way
        r = client.get("/api/owner/export", headers={"Authorization": f"Bearer {OWNER}"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    assert store.answers.retracted_ids() == set(undone)
    studio_dir = tmp_path / "studio-export"
    with zipfile.ZipFile(io.BytesIO(r.content)) as zf:
        zf.extractall(studio_dir)
    studio_dir = studio_dir / "preflab-export"
    store.close()

    cli_dir = tmp_path / "cli-export"
    assert main(["export", str(run), "--out", str(cli_dir)]) == 0
    assert main(["export", "--check", str(studio_dir)]) == 0  # digests match, ratings included

    cli, studio = read_export(cli_dir), read_export(studio_dir)
    assert studio.judgements == cli.judgements and studio.labels == cli.labels
    assert [j.id for j in cli.judgements] == ["t-q2", "t-q3", again]
    assert not set(undone) & {x for lab in cli.labels for x in lab.judgement_ids}
    labels = {(lab.a, lab.b): (lab.p, lab.judgement_ids) for lab in cli.labels}
    # q1 counts alice's second answer only; q3 only the teacher's (alice's answer was undone)
    assert labels == {
        ("s0", "s1"): (0.0, (again,)),
        ("s2", "s3"): (0.0, ("t-q2",)),
        ("s4", "s5"): (1.0, ("t-q3",)),
    }
    assert (
        studio.ratings
        == cli.ratings
        == [Rating(annotator_id="alice", stream_id="r1", step=2, t=0.4, value=0.5)]
    )
    assert [a.id for a in studio.annotators] == [a.id for a in cli.annotators]
    digests = [
        json.loads((d / "manifest.json").read_text())["sha256"] for d in (cli_dir, studio_dir)
    ]
    for name in ("queries", "judgements", "labels", "ratings", "annotators", "segments"):
        assert digests[0][f"{name}.parquet"] == digests[1][f"{name}.parquet"], name

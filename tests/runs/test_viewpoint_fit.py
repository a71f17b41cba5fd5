"""`preflab fit RUN --by-viewpoint`: a crowd with a minority that prefers the opposite gets one
reward per viewpoint, each agreeing with its own group's preference (Crowd-PrefRL §5.2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from preflab import load_reward_model
from preflab.cli.main import main
from preflab.config import TrainConfig
from preflab.errors import DataError
from preflab.runs.labelling import start_labelling
from preflab.runs.viewpoint_fit import fit_viewpoints
from preflab.store import FeedbackStore
from preflab.testing.factories import make_judgement

MAJORITY = ("m1", "m2", "m3", "m4", "m5", "m6")
MINORITY = ("n1", "n2", "n3")


@pytest.fixture(scope="module")
def export(finished: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run's export, to make labelling runs from."""
    out = tmp_path_factory.mktemp("viewpoints") / "export"
    assert main(["export", str(finished), "--out", str(out)]) == 0
    return out


def _labelling(export: Path, run: Path) -> Path:
    """A labelling run of 60 pairs of 10-step segments."""
    start_labelling(export, run, TrainConfig(segment_length=10), pairs=60)
    return run


def _answer(run: Path, who: tuple[str, ...], *, higher: bool, rng: np.random.Generator) -> None:
    """Each of ``who`` answers every pair for the segment of higher (or lower) true return, one
    answer in ten the other way."""
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        queries = store.queries.all()
        ids = sorted({s for q in queries for s in (*q.a, *q.b)})
        ret = {s.id: s.true_return for s in store.segments.get(ids)}
        out = []
        for a in who:
            for q in queries:
                a_wins = (ret[q.a[0]] > ret[q.b[0]]) == higher
                a_wins ^= bool(rng.random() < 0.1)
                out.append(make_judgement(f"{a}-{q.id}", q.id, a, 1.0 if a_wins else 0.0))
        store.answers.add(out)
    finally:
        store.close()


def test_a_minority_viewpoint_gets_a_reward_of_its_own(export: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    run = _labelling(export, tmp_path / "run")
    with pytest.raises(DataError, match="no answers yet"):
        fit_viewpoints(run)
    _answer(run, MAJORITY, higher=True, rng=rng)
    _answer(run, MINORITY, higher=False, rng=rng)
    assert main(["fit", str(run), "--by-viewpoint", "--epochs", "30"]) == 0
    summary = json.loads((run / "viewpoints" / "viewpoints.json").read_text())
    assert summary["n_groups"] == 2
    big, small = summary["groups"]
    assert set(big["members"]) == set(MAJORITY) and set(small["members"]) == set(MINORITY)
    assert big["n_labels"] == small["n_labels"] == 60  # each group labels every pair
    # each group's reward orders segments as its members do: the majority's with the true
    # return, the minority's against it
    assert big["reward_accuracy"] > 0.75 and small["reward_accuracy"] < 0.25
    for g in summary["groups"]:
        load_reward_model(run / g["reward_dir"])  # a reward model like the run's own


def test_a_crowd_sml_cannot_weigh_is_refused_in_one_line(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _labelling(export, tmp_path / "run")
    _answer(run, ("x1", "x2"), higher=True, rng=np.random.default_rng(0))  # SML needs three
    with pytest.raises(DataError, match="SML cannot weigh these answers"):
        fit_viewpoints(run)
    assert main(["fit", str(run), "--by-viewpoint"]) != 0
    err = capsys.readouterr().err
    assert "SML cannot weigh" in err and "Traceback" not in err
    assert not (run / "viewpoints").exists()

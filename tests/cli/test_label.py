"""``preflab label`` and ``preflab fit``: bad options are refused before anything is written or
replaced (``--env-id`` against the env the trajectories name, ``--studio-port``, ``--epochs``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.records import Annotator
from preflab.store import FeedbackStore
from preflab.testing.factories import make_judgement
from tests.run_support import digest_run


@pytest.fixture(scope="module")
def exported(finished: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An export of the session's finished smoke run (Pendulum-v1): its segments.parquet names
    the env."""
    out = tmp_path_factory.mktemp("label") / "export"
    assert main(["export", str(finished), "--out", str(out)]) == 0
    return out


def _answered(exported: Path, run: Path) -> Path:
    """A labelling run of ``exported`` with every pair answered (half each way)."""
    assert main(["label", str(exported), "--run-dir", str(run), "--segment-length", "10"]) == 0
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        store.annotators.add(Annotator(id="h-1", source="human", name="Ada"))
        store.answers.add(
            make_judgement(f"j{k}", q.id, "h-1", float(k % 2), created_at=1.0)
            for k, q in enumerate(store.queries.all())
        )
    finally:
        store.close()
    return run


def test_label_refuses_an_env_id_other_than_the_exports(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    argv = ["label", str(exported), "--run-dir", str(run), "--segment-length", "10"]
    assert main([*argv, "--env-id", "CartPole-v1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("preflab label: error: --env-id CartPole-v1 does not match"), err
    assert "Pendulum-v1" in err and "Traceback" not in err
    assert not run.exists()
    assert main([*argv, "--env-id", "Pendulum-v1"]) == 0  # the same env: accepted


def test_label_refuses_an_env_id_other_than_a_minari_datasets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("minari")
    from tests.runs.test_labelling import pendulum_minari

    data = pendulum_minari(tmp_path / "ds", episodes=2, steps=30, seed=0)
    run = tmp_path / "run"
    argv = ["label", str(data), "--run-dir", str(run), "--segment-length", "10"]
    assert main([*argv, "--env-id", "CartPole-v1"]) == 1
    err = capsys.readouterr().err
    assert "--env-id CartPole-v1 does not match" in err and "Pendulum-v1" in err, err
    assert not run.exists()


def test_label_refuses_a_studio_port_out_of_range(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main(["label", str(exported), "--run-dir", str(run), "--studio-port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("preflab label: error: --studio-port must be in 1..65535, got 0"), err
    assert not run.exists()


@pytest.mark.parametrize("epochs", ["-3", "0"])
def test_fit_refuses_epochs_below_one_and_keeps_the_fitted_model(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], epochs: str
) -> None:
    run = _answered(exported, tmp_path / "run")
    assert main(["fit", str(run), "--epochs", "2"]) == 0
    before = digest_run(run)
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:  # the option parser's refusal, as --pairs
        main(["fit", str(run), "--epochs", epochs])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--epochs must be at least 1, got {epochs}" in err and "Traceback" not in err
    assert digest_run(run) == before  # the fitted reward model is not replaced

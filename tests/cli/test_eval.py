"""``preflab eval RUN``: deterministic, read-only, the run's own evaluation repeated."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.config import TrainConfig


def _digest(run_dir: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(run_dir)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def run_dir(finished: Path) -> Path:
    """The session's finished smoke run (tests/conftest.py): eval only reads it, which the
    first test checks byte for byte (a run of its own cost each worker another training run)."""
    return finished


def _eval_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["eval", *args, "--json"]) == 0
    out: dict = json.loads(capsys.readouterr().out)
    return out


def test_eval_is_deterministic_and_leaves_the_run_untouched(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _digest(run_dir)
    first = _eval_json(capsys, str(run_dir), "--episodes", "3")
    assert _eval_json(capsys, str(run_dir), "--episodes", "3") == first
    assert _digest(run_dir) == before  # not a byte (nor a timestamp) changed
    assert first["deterministic"] and first["episodes"] == 3
    eps = first["per_episode"]
    assert [e["seed"] for e in eps] == [10_000, 10_001, 10_002]
    assert all(e["steps"] == 200 for e in eps)  # Pendulum's time limit
    assert all(isinstance(e["learned_return"], float) for e in eps)
    trues = [e["true_return"] for e in eps]
    assert first["true_return"]["mean"] == pytest.approx(sum(trues) / 3)
    assert len(set(trues)) == 3  # three different starts


def test_eval_repeats_the_runs_own_evaluation(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    config = TrainConfig.load(run_dir / "config.json")
    got = _eval_json(capsys, str(run_dir), "--episodes", str(config.eval_episodes))
    assert got["true_return"]["mean"] == pytest.approx(summary["true_return"], abs=1e-9)
    assert got["true_return"]["std"] == pytest.approx(summary["true_return_std"], abs=1e-9)


def test_stochastic_eval_is_seeded(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = (str(run_dir), "--episodes", "2", "--stochastic", "--seed", "5")
    a, b = _eval_json(capsys, *args), _eval_json(capsys, *args)
    assert a == b and not a["deterministic"] and a["seed"] == 5
    det = _eval_json(capsys, str(run_dir), "--episodes", "2", "--seed", "5")
    assert det["true_return"] != a["true_return"]  # sampled actions differ from the mode


def test_eval_prints_a_table(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "true return" in out and "learned return" in out and "mean ± std" in out


def test_eval_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tmp_path / "nowhere")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["eval", str(tmp_path), "--episodes", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("preflab eval: error: --episodes must be at least 1, got 0")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seed", ["-1", "99999999999999999999", str(2**32)])
def test_eval_refuses_a_seed_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: str
) -> None:
    # checked with the options, before the run is read: a path of no run is enough
    assert main(["eval", str(tmp_path), "--seed", seed]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"preflab eval: error: --seed must be in 0..4294967295, got {seed}")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_eval_refuses_a_config_edited_after_the_run_started(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Like a resume: the checkpoint was trained with the config checkpoints/run.json keeps; an
    edited config.json (here its seed, which picks the evaluation's starts) is named, not used."""
    from tests.run_support import copy_run, digest_run

    run = copy_run(finished, tmp_path)
    data = json.loads((run / "config.json").read_text())
    data["seed"] = 7
    (run / "config.json").write_text(json.dumps(data))
    before = digest_run(run)
    assert main(["eval", str(run), "--episodes", "1", "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("preflab eval: error:") and "Traceback" not in captured.err
    assert "was edited after the run started: seed (started with 0, now 7)" in captured.err
    assert digest_run(run) == before

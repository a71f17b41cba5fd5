"""``--device`` on ``train``, ``eval``, ``record``, ``label`` and ``fit``: a GPU that torch
cannot use is refused in one line on stderr, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from preflab.cli.main import main

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)


def _files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def _one_line_refusal(err: str, name: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert f"--device {name} needs a CUDA GPU" in lines[0]
    assert f"torch {torch.__version__}" in lines[0]
    assert "torch.cuda.is_available() is False" in lines[0]
    assert "install a CUDA build of torch" in lines[0]


@pytest.mark.parametrize("name", ["cuda", "cuda:0"])
def test_train_on_a_gpu_here_writes_no_run_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--device", name, "--run-dir", "run"]) == 1
    _one_line_refusal(capsys.readouterr().err, name)
    assert _files(tmp_path) == []


def test_label_on_a_gpu_here_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["label", "missing.npz", "--run-dir", "lab", "--device", "cuda"]) == 1
    _one_line_refusal(capsys.readouterr().err, "cuda")
    assert _files(tmp_path) == []


@pytest.mark.parametrize("verb", ["eval", "record", "resume"])
def test_reading_or_resuming_a_run_on_a_gpu_here_is_refused_and_changes_nothing(
    finished: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    verb: str,
) -> None:
    from tests.run_support import copy_run, digest_run

    run = copy_run(finished, tmp_path)
    before = digest_run(run)
    argv = {
        "eval": ["eval", str(run), "--device", "cuda"],
        "record": ["record", str(run), "--out", str(tmp_path / "c.mp4"), "--device", "cuda"],
        "resume": ["train", "--resume", str(run), "--device", "cuda"],
    }[verb]
    assert main(argv) == 1
    _one_line_refusal(capsys.readouterr().err, "cuda")
    assert digest_run(run) == before
    assert not (tmp_path / "c.mp4").exists()


def test_a_misspelt_device_is_refused_before_loading(
    finished: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(finished), "--device", "gpu"]) == 1
    assert "'auto', 'cpu', 'cuda' or 'cuda:N'" in capsys.readouterr().err


def test_fit_on_a_gpu_here_is_refused_and_changes_nothing(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from preflab.config import TrainConfig
    from preflab.runs.labelling import start_labelling
    from tests.run_support import digest_run

    assert main(["export", str(finished), "--out", str(tmp_path / "export")]) == 0
    start_labelling(tmp_path / "export", tmp_path / "lab", TrainConfig(segment_length=10), pairs=3)
    before = digest_run(tmp_path / "lab")
    capsys.readouterr()
    assert main(["fit", str(tmp_path / "lab"), "--device", "cuda"]) == 1
    _one_line_refusal(capsys.readouterr().err, "cuda")
    assert digest_run(tmp_path / "lab") == before

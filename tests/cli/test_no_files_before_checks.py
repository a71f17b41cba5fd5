"""A refused command writes nothing: no ./segments, no feedback.db in a non-run, no sweep.json,
no half-made run directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.sweep.runner import ray_available


def _files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_export_from_an_unreachable_store_creates_no_segments_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["export", "postgresql://nobody@127.0.0.1:1/nothing"]) == 1
    assert "preflab export: error:" in capsys.readouterr().err
    assert _files(tmp_path) == []


def test_export_of_a_directory_that_is_not_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    assert main(["export", "notes"]) == 1
    err = capsys.readouterr().err
    assert "notes is not a PrefLab run directory (no feedback.db)" in err
    assert _files(tmp_path) == ["notes"]


@pytest.mark.skipif(ray_available(), reason="checks the refusal when Ray is missing")
def test_sweep_on_ray_without_ray_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["sweep", "--preset", "smoke", "--axis", "seed=0,1", "--ray", "--out", "sw"]
    assert main(argv) == 1
    assert "Ray is not installed" in capsys.readouterr().err
    assert _files(tmp_path) == []


@pytest.mark.parametrize(
    "bad",
    [["--env-id", "Pendulm-v1"], ["--total-labels", "-1"], ["--algo", "ppo", "--n-envs", "0"]],
)
def test_train_with_a_bad_config_leaves_no_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["train", *bad, "--run-dir", "run"])
    except SystemExit as exc:  # the option parser's own refusal
        code = int(exc.code or 0)
    assert code in (1, 2)
    assert _files(tmp_path) == []

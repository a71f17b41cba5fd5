"""``preflab record RUN --out clip.mp4``: a playable H.264 video of the trained policy, one
frame for each episode's start and one after every step."""

from __future__ import annotations

from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest

from preflab.cli.main import main
from preflab.config import TrainConfig
from preflab.policy.evaluate import episode_returns
from preflab.runs import load_run, train
from tests.run_support import digest_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("record") / "run"
    train(TrainConfig.smoke(env_id="CartPole-v1", total_steps=400, total_labels=4), run_dir=d)
    return d


def _read(path: Path) -> tuple[dict, list[np.ndarray]]:
    gen = imageio_ffmpeg.read_frames(str(path))
    meta = next(gen)
    w, h = meta["size"]
    frames = [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in gen]
    return meta, frames


def test_record_writes_a_playable_mp4_with_a_frame_per_step(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest_run(run_dir)
    out = tmp_path / "videos" / "clip.mp4"
    args = ["record", str(run_dir), "--out", str(out), "--episodes", "2", "--max-steps", "30"]
    assert main([*args, "--size", "160"]) == 0
    assert digest_run(run_dir) == before  # the run is only read
    assert [p.name for p in out.parent.iterdir()] == ["clip.mp4"]  # no part file left
    # the same episodes, played independently: each is its steps plus its first frame
    eps = episode_returns(
        load_run(run_dir).agent, "CartPole-v1", n_episodes=2, seed=10_000, max_steps=30
    )
    expected = sum(e.steps + 1 for e in eps)
    meta, frames = _read(out)
    assert len(frames) == expected
    assert "h264" in meta["codec"] and meta["fps"] == pytest.approx(50)  # CartPole's real time
    assert frames[0].shape == (106, 160, 3)  # CartPole's 600×400 fitted into 160
    assert imageio_ffmpeg.count_frames_and_secs(str(out))[0] == expected
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).mean() > 0.1  # it moves
    printed = capsys.readouterr().out
    assert printed.startswith(f"wrote {out}: {expected} frames, 160×106, 50 fps")


def test_record_refuses_bad_arguments_in_one_message(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "clip.avi"
    assert main(["record", str(run_dir), "--out", str(out), "--episodes", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("preflab record: error: --out must end in .mp4 or .webm")
    assert "--episodes must be at least 1, got 0" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seed", ["-1", "99999999999999999999", str(2**32)])
def test_record_refuses_a_seed_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: str
) -> None:
    out = tmp_path / "clip.mp4"
    # checked with the other options, before the run is read: a path of no run is enough
    assert main(["record", str(tmp_path / "run"), "--out", str(out), "--seed", seed]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"preflab record: error: --seed must be in 0..4294967295, got {seed}")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_record_refuses_a_config_edited_after_the_run_started(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Like a resume: the policy is played with the config it was trained with, or not at all."""
    import json

    from tests.run_support import copy_run

    run = copy_run(run_dir, tmp_path)
    data = json.loads((run / "config.json").read_text())
    data["seed"] = 7
    (run / "config.json").write_text(json.dumps(data))
    out = tmp_path / "clip.mp4"
    assert main(["record", str(run), "--out", str(out), "--max-steps", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("preflab record: error:") and "Traceback" not in err
    assert "was edited after the run started: seed (started with 0, now 7)" in err
    assert not out.exists()

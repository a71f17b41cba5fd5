"""Experiment tracking (issue #29): --log tensorboard and --log wandb (offline)."""

import csv
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.rundir.tracking import make_trackers, scalars
from preflab.runs import train


def _events(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the TensorBoard event files of ``directory``: tag → [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_scalars_keeps_finite_numbers_only() -> None:
    row = {"a": 1, "b": 2.5, "c": float("nan"), "d": "x", "e": True, "f": float("inf")}
    assert scalars(row) == {"a": 1.0, "b": 2.5}


def test_a_resumed_run_logs_the_replayed_rounds_once(tmp_path: Path) -> None:
    """A run logged rounds at steps 100, 200 and 300 and was killed before its checkpoint of
    300; resumed from 200, it logs 300 again (replayed) and 400: TensorBoard shows each step
    once, 300 with the replay's value."""
    (first,) = make_trackers(["tensorboard"], tmp_path, {})
    for step, x in ((100, 1.0), (200, 2.0), (300, 3.0)):
        first.round({"env_steps": step, "x": x})
    first.writer.close()  # type: ignore[attr-defined]  # the killed process's file, as it was
    (again,) = make_trackers(["tensorboard"], tmp_path, {})
    again.resumed(200)
    for step, x in ((300, 30.0), (400, 40.0)):
        again.round({"env_steps": step, "x": x})
    again.finish({"env_steps": 400})
    assert _events(tmp_path / "tensorboard")["preflab/x"] == [
        (100, 1.0), (200, 2.0), (300, 30.0), (400, 40.0)
    ]  # fmt: skip


def test_unknown_trackers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="choose from tensorboard, wandb"):
        make_trackers(["mlflow"], tmp_path, {})


def test_a_run_logs_its_rounds_to_tensorboard_and_wandb_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finished: Path
) -> None:
    """Every round's metrics.csv row is in TensorBoard at its env step (the same values); the
    policy's SB3 metrics are beside them; W&B keeps an offline run in the run directory with
    the final summary, and nothing is sent (no WANDB_MODE set: offline)."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    cfg = TrainConfig.smoke(log=("tensorboard", "wandb"), log_clip_every=2)
    result = train(cfg, run_dir=run)
    with (run / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    events = _events(run / "tensorboard")
    got = dict(events["preflab/n_labels"])
    assert got == {int(r["env_steps"]): float(r["n_labels"]) for r in rows}
    acc = dict(events["preflab/reward_accuracy"])
    for r in rows:
        if r["reward_accuracy"] not in ("", "nan"):
            assert acc[int(r["env_steps"])] == pytest.approx(float(r["reward_accuracy"]))
    assert dict(events["final/n_labels"]) == {result.env_steps: float(result.n_labels)}
    policy = _events(run / "tensorboard" / "policy")
    assert any(t.startswith(("train/", "rollout/", "time/")) for t in policy)
    (offline,) = run.glob("wandb/offline-run-*")  # offline: kept here, nothing sent
    (log,) = offline.glob("*.wandb")
    data = log.read_bytes()  # W&B's record log keeps the keys as plain strings
    assert b"preflab/n_labels" in data and b"preflab/reward_accuracy" in data
    assert b"true_return" in data  # the final summary
    _check_clips(run, rows, data)
    # the clips render in their own env with their own seeds: the run itself is unchanged (the
    # same smoke run without trackers: the session's shared one, tests/conftest.py)
    with (finished / "metrics.csv").open() as f:
        plain_rows = list(csv.DictReader(f))
    same = ("env_steps", "n_labels", "reward_accuracy", "train_loss", "eval_true_return")
    assert [[r.get(k) for k in same] for r in rows] == [
        [r.get(k) for k in same] for r in plain_rows
    ]


def _check_clips(run: Path, rows: list[dict[str, str]], wandb_log: bytes) -> None:
    """Rounds 0, 2, ... each left an MP4 in RUN_DIR/clips and a looping GIF of the same frames
    under 'policy/clip' in TensorBoard at the round's env step; W&B logged the videos."""
    import io

    import imageio_ffmpeg
    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from preflab.media.timing import clip_timing

    clip_rounds = [int(r["round"]) for r in rows if int(r["round"]) % 2 == 0]
    assert sorted(p.name for p in (run / "clips").glob("*.mp4")) == [
        f"round-{k:04d}.mp4" for k in clip_rounds
    ]
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"images": 0})
    acc.Reload()
    images = acc.Images("policy/clip")
    steps = {int(r["round"]): int(r["env_steps"]) for r in rows}
    assert [e.step for e in images] == [steps[k] for k in clip_rounds]
    for k, event in zip(clip_rounds, images, strict=True):
        gif = Image.open(io.BytesIO(event.encoded_image_string))
        assert gif.format == "GIF" and gif.is_animated and gif.info.get("loop") == 0
        mp4 = imageio_ffmpeg.read_frames(str(run / "clips" / f"round-{k:04d}.mp4"))
        meta = next(mp4)
        n_mp4 = sum(1 for _ in mp4)
        # Pendulum plays below GIF's 50 fps, so every frame is in both (reset + 200 steps; the
        # GIF merges identical neighbours into one longer frame), each within half a hundredth
        # of a second of the clip's frame time (GIF's resolution)
        durations = []
        for i in range(gif.n_frames):
            gif.seek(i)
            durations.append(gif.info["duration"])
        fps = clip_timing("Pendulum-v1").fps
        assert n_mp4 == 201 and abs(sum(durations) / 1000 - 201 / fps) <= 201 * 0.005
        assert max(meta["size"]) == 160
    assert wandb_log.count(b"policy/clip") >= 1


def test_clips_without_a_tracker_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no --log tracker is on"):
        train(TrainConfig.smoke(log_clip_every=1), run_dir=tmp_path / "run")


def test_a_clip_that_cannot_render_warns_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import preflab.media.policy_frames as frames

    def broken(*_a, **_k):
        raise RuntimeError("no OpenGL here")

    monkeypatch.setattr(frames, "rollout_frames", broken)
    run = tmp_path / "run"
    result = train(
        TrainConfig.smoke(log=("tensorboard",), log_clip_every=1, total_steps=400), run_dir=run
    )
    assert result.env_steps >= 400
    assert any("could not be rendered" in w and "no OpenGL here" in w for w in result.warnings)
    assert not list((run / "clips").glob("*.mp4"))


def test_the_policys_replayed_metrics_show_once(tmp_path: Path) -> None:
    """SB3's logger of the policy: events logged at steps 100, 200 and 300 by a process killed
    after its checkpoint at 200; the resumed logger (resumed_at=200) logs 300 again and 400:
    TensorBoard shows each step once, 300 with the replay's value."""
    from preflab.rundir.tracking import policy_logger

    first = policy_logger(tmp_path)
    for step, x in ((100, 1.0), (200, 2.0), (300, 3.0)):
        first.record("train/x", x)
        first.dump(step)
    first.close()
    again = policy_logger(tmp_path, resumed_at=200)
    for step, x in ((300, 30.0), (400, 40.0)):
        again.record("train/x", x)
        again.dump(step)
    again.close()
    assert _events(tmp_path / "tensorboard" / "policy")["train/x"] == [
        (100, 1.0), (200, 2.0), (300, 30.0), (400, 40.0)
    ]  # fmt: skip


def test_a_killed_and_resumed_run_shows_each_policy_step_once(tmp_path: Path) -> None:
    """A run with --log tensorboard killed while writing its third checkpoint resumes from the
    second and replays what the policy learnt after it: every policy metric of
    ``tensorboard/policy`` shows each of its steps once (SB3's own writer showed the replayed
    step twice)."""
    from tests.run_support import run_killable

    code = (
        "import sys; from preflab.config import TrainConfig; from preflab.runs import resume, train\n"
        "run, mode = sys.argv[1:3]\n"
        "resume(run) if mode == 'resume' else "
        "train(TrainConfig.smoke(log=('tensorboard',)), run_dir=run)\n"
    )
    run = tmp_path / "run"
    killed = run_killable(code, str(run), "train", failpoint="checkpoint_partial:3")
    assert killed.returncode != 0
    # its last checkpoint came before the policy's first learning: all it logged is replayed
    before = _events(run / "tensorboard" / "policy")
    assert before, "the killed process logged no policy metric"
    assert run_killable(code, str(run), "resume").returncode == 0
    after = _events(run / "tensorboard" / "policy")
    assert after and set(before) <= set(after)
    for tag, events in after.items():
        steps = [s for s, _v in events]
        assert steps == sorted(set(steps)), f"{tag} shows a step twice: {steps}"

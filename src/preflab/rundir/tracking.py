"""Experiment tracking: a run's metrics to TensorBoard and Weights & Biases (``--log``).

Every round's row (the columns of ``metrics.csv``: labels, judgements, reward-model losses,
held-out accuracy and correlation, ℓ2, pseudo-label share, returns) goes to each tracker at
the round's env step, and the final summary at the end. With TensorBoard the policy's own
metrics (SB3's ``rollout/``, ``train/``) are written beside them through SB3's logger.

Every ``log_clip_every`` rounds a clip of the current policy goes to each tracker as well (an
animated image in TensorBoard's Images tab; a video in W&B), and is kept as
``RUN_DIR/clips/round-NNNN.mp4``.

* ``tensorboard``: event files in ``RUN_DIR/tensorboard`` (``preflab/…`` scalars) and
  ``RUN_DIR/tensorboard/policy`` (SB3's); ``tensorboard --logdir RUN_DIR/tensorboard``.
* ``wandb``: a W&B run in ``RUN_DIR/wandb``, **offline unless** ``WANDB_MODE`` says otherwise
  (nothing is sent anywhere by default; ``wandb sync RUN_DIR/wandb/offline-run-*`` uploads
  it). Its run id is stable per run directory, so a resumed run continues the same W&B run.

Both need the ``track`` extra (``pip install 'preflab[track]'``).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from preflab.errors import ConfigError

TRACKERS = ("tensorboard", "wandb")


class Tracker(Protocol):
    """Receives a run's metrics."""

    def round(self, row: Mapping[str, Any]) -> None:
        """One round's metrics (``row['env_steps']`` is the step)."""
        ...

    def clip(self, step: int, frames: np.ndarray, path: Path, fps: float) -> None:
        """A clip of the current policy: ``frames`` (T, H, W, 3) uint8, also saved at ``path``
        (MP4) and played at ``fps``."""
        ...

    def finish(self, summary: Mapping[str, Any]) -> None:
        """The run's summary; the tracker closes."""
        ...

    def resumed(self, env_steps: int) -> None:
        """The run goes on from its checkpoint at ``env_steps``: what was logged after it (by
        the process that was stopped) is logged again as the run replays it."""
        ...


def scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of ``row`` (bools and text left out)."""
    return {
        k: float(v)
        for k, v in row.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))
    }


def _missing(name: str, package: str) -> ConfigError:
    return ConfigError(
        f"--log {name} needs the {package} package; install the tracking extra: "
        "pip install 'preflab[track]' (or drop --log)"
    )


class TensorBoardTracker:
    """PrefLab's round metrics as ``preflab/<name>`` scalars at the round's env step."""

    def __init__(self, run_dir: Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise _missing("tensorboard", "tensorboard") from exc
        self.dir = run_dir / "tensorboard"
        self.writer = SummaryWriter(str(self.dir))

    def resumed(self, env_steps: int) -> None:
        """TensorBoard hides the stopped process's events after the checkpoint (``purge_step``),
        so the replayed rounds show once. The policy's own metrics (``tensorboard/policy``, SB3's
        logger) are purged alike at the restore (:func:`policy_logger`)."""
        from torch.utils.tensorboard import SummaryWriter

        self.writer.close()
        self.writer = SummaryWriter(str(self.dir), purge_step=env_steps + 1)

    def round(self, row: Mapping[str, Any]) -> None:
        step = int(row.get("env_steps", 0))
        for k, v in scalars(row).items():
            if k not in ("round", "env_steps"):
                self.writer.add_scalar(f"preflab/{k}", v, global_step=step)
        self.writer.flush()

    def clip(self, step: int, frames: np.ndarray, path: Path, fps: float) -> None:
        """The clip as an animated GIF image summary ('policy/clip')."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        gif = gif_bytes(frames, fps)
        _, h, w, _ = frames.shape
        image = Summary.Image(height=h, width=w, colorspace=3, encoded_image_string=gif)
        summary = Summary(value=[Summary.Value(tag="policy/clip", image=image)])
        self.writer._get_file_writer().add_summary(summary, global_step=step)
        self.writer.flush()

    def finish(self, summary: Mapping[str, Any]) -> None:
        step = int(summary.get("env_steps", 0))
        for k, v in scalars(summary).items():
            self.writer.add_scalar(f"final/{k}", v, global_step=step)
        self.writer.close()


class WandbTracker:
    """A W&B run (offline unless ``WANDB_MODE`` is set) with the config, rounds and summary."""

    def __init__(self, run_dir: Path, config: Mapping[str, Any], *, sync_tensorboard: bool) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise _missing("wandb", "wandb") from exc
        run_id = "preflab-" + hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:12]
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "preflab"),
            dir=str(run_dir),
            id=run_id,
            name=run_dir.name,
            config=dict(config),
            mode=cast(Any, os.environ.get("WANDB_MODE", "offline")),  # wandb checks the value
            resume="allow",
            sync_tensorboard=sync_tensorboard,
            settings=wandb.Settings(silent=True, console="off"),
        )

    def resumed(self, env_steps: int) -> None:
        """Nothing to do: the run resumes the same W&B run (``resume="allow"``), and W&B leaves
        out a step it has logged already (with a warning)."""

    def round(self, row: Mapping[str, Any]) -> None:
        vals = scalars(row)
        step = int(vals.pop("env_steps", 0))
        self.run.log({f"preflab/{k}": v for k, v in vals.items()}, step=step)

    def clip(self, step: int, frames: np.ndarray, path: Path, fps: float) -> None:
        """The MP4 at ``path`` as a W&B video ('policy/clip')."""
        import wandb

        self.run.log({"policy/clip": wandb.Video(str(path), format="mp4")}, step=step)

    def finish(self, summary: Mapping[str, Any]) -> None:
        self.run.summary.update(scalars(summary))
        self.run.finish()


def gif_bytes(frames: np.ndarray, fps: float) -> bytes:
    """``frames`` (T, H, W, 3) uint8 as an endlessly looping animated GIF at about real time:
    GIF frame times are whole hundredths of a second, at least 0.02 s, so faster clips keep
    every k-th frame (k = ceil(fps / 50))."""
    import io

    from PIL import Image

    stride = max(1, math.ceil(fps / 50))
    images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames[::stride]]
    duration_ms = max(20, round(100 * stride / fps) * 10)
    buf = io.BytesIO()
    images[0].save(
        buf, format="GIF", save_all=True, append_images=images[1:], duration=duration_ms, loop=0
    )
    return buf.getvalue()


def make_trackers(names: Sequence[str], run_dir: Path, config: Mapping[str, Any]) -> list[Tracker]:
    """The trackers ``names`` asks for (each at most once, in order)."""
    unknown = sorted(set(names) - set(TRACKERS))
    if unknown:
        raise ConfigError(f"--log {' '.join(unknown)}: choose from {', '.join(TRACKERS)}")
    out: list[Tracker] = []
    for name in dict.fromkeys(names):
        if name == "tensorboard":
            out.append(TensorBoardTracker(run_dir))
        else:
            out.append(WandbTracker(run_dir, config, sync_tensorboard="tensorboard" in names))
    return out


def policy_logger(run_dir: Path, resumed_at: int | None = None) -> Any:
    """SB3's logger writing the policy's own metrics to ``RUN_DIR/tensorboard/policy``, at the
    agent's ``num_timesteps``. For a resumed run, ``resumed_at`` is the agent's ``num_timesteps``
    at the checkpoint: TensorBoard then hides the stopped process's events after it
    (``purge_step``), so the replayed stretch shows once, as PrefLab's round metrics do."""
    from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat

    folder = str(run_dir / "tensorboard" / "policy")
    out = TensorBoardOutputFormat(folder)
    if resumed_at is not None:  # SB3 makes its writer without a purge step: replace it
        from torch.utils.tensorboard import SummaryWriter

        out.writer.close()  # its file holds the file-version event only
        out.writer = SummaryWriter(log_dir=folder, purge_step=resumed_at + 1)
    return Logger(folder, [out])

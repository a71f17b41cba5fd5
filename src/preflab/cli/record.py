"""``preflab record RUN_DIR --out clip.mp4 [--episodes 1] [--max-steps N]``: a video of a run's
trained policy (H.264 MP4, or VP9 WebM for ``.webm``), played at the env's real time.

Frames come from the studio's renderers (:mod:`preflab.media.replay`): MuJoCo envs through a
camera that follows the body (gymnasium's default view for the env, moved along with the tracked
body, so a hopper or a cheetah never leaves the picture), classic control through the env's own
``rgb_array`` render, grid worlds with MiniGrid's tiles; other envs with their ``rgb_array``
render. One frame for each episode's start and one after every step. Reads the run directory
and writes only ``--out``.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from preflab.device import check_device_name
from preflab.errors import ConfigError
from preflab.rundir.folders import check_output_dir
from preflab.seeding import MAX_SEED


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="preflab record", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    ap.add_argument("run_dir", help="a run directory made by `preflab train`")
    ap.add_argument("--out", required=True, help="the video file to write (.mp4 or .webm)")
    ap.add_argument("--episodes", type=int, default=1, help="episodes, one after another (1)")
    ap.add_argument(
        "--max-steps", type=int, default=1000, help="steps per episode at most (default 1000)"
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the first episode's reset (default: the run's own evaluation seed)",
    )
    ap.add_argument("--size", type=int, default=480, help="longer side of the video in pixels")
    ap.add_argument(
        "--stochastic", action="store_true", help="sample actions (default: the most likely)"
    )
    ap.add_argument(
        "--device",
        default="auto",
        help="where torch runs the policy and reward model: auto (a CUDA GPU when torch sees "
        "one, else the CPU), cpu, cuda or cuda:N (default auto)",
    )
    return ap.parse_args(argv)


def check_args(args: argparse.Namespace) -> str:
    """The video format; every bad argument reported in one message."""
    problems = []
    suffix = Path(args.out).suffix.lower().lstrip(".")
    if suffix not in ("mp4", "webm"):
        problems.append(f"--out must end in .mp4 or .webm, got {args.out!r}")
    if args.episodes < 1:
        problems.append(f"--episodes must be at least 1, got {args.episodes}")
    if args.max_steps < 1:
        problems.append(f"--max-steps must be at least 1, got {args.max_steps}")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        problems.append(
            f"--seed must be in 0..{MAX_SEED}, got {args.seed} (a reset seed); pass a seed in "
            "that range or leave --seed out for the run's own evaluation seed"
        )
    if not 16 <= args.size <= 2048:
        problems.append(f"--size must be between 16 and 2048 pixels, got {args.size}")
    try:
        check_device_name(args.device)
    except ConfigError as exc:
        problems.append(f"--{exc}")
    if Path(args.out).is_dir():
        problems.append(f"--out {args.out} is a directory; give a file name such as clip.mp4")
    try:
        check_output_dir(Path(args.out).parent, what=f"--out {args.out}: its folder")
    except ConfigError as exc:
        problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(problems))
    return suffix


def main(argv: list[str]) -> int:
    args = parse(argv)
    fmt = check_args(args)
    os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering (before mujoco loads)
    logging.getLogger("OpenGL").setLevel(logging.WARNING)  # PyOpenGL's start-up INFO line
    from preflab.env_families import family_of
    from preflab.media.policy_frames import rollout_frames
    from preflab.policy.evaluate import EVAL_SEED_OFFSET
    from preflab.runs import check_run_dir, load_run

    config = check_run_dir(args.run_dir)
    why = family_of(config.env_id).unsupported("record", config.env_id, str(args.run_dir))
    if why:
        raise ConfigError(why)
    run = load_run(args.run_dir, device=args.device)
    from preflab.media.encode import ClipWriter
    from preflab.media.timing import clip_timing

    timing = clip_timing(config.env_id)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # by default the episodes start from the seeds of the run's own final evaluation
    seed = EVAL_SEED_OFFSET + config.seed if args.seed is None else args.seed
    tmp = out.with_name(f".{out.name}.part")
    try:
        with ClipWriter(tmp, fps=timing.fps, fmt=fmt) as writer:  # type: ignore[arg-type]
            for img in rollout_frames(
                run.agent,
                config.env_id,
                episodes=args.episodes,
                max_steps=args.max_steps,
                seed=seed,
                deterministic=not args.stochastic,
                size=args.size,
            ):
                writer.write(img)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    w, h = writer.size or (0, 0)
    print(
        f"wrote {out}: {writer.n_frames} frames, {w}×{h}, {timing.fps:g} fps "
        f"({writer.n_frames / timing.fps:.1f} s at the env's real time), "
        f"{args.episodes} episode{'s' if args.episodes > 1 else ''} from seed {seed}"
    )
    return 0

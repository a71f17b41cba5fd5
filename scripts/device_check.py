# ruff: noqa: T201  (a script: it reports on the terminal)
"""The device check (issue 60 item 5): what PrefLab does on a CUDA GPU against the CPU of the same
machine, in one Markdown table. Run by scripts/device_check.sh (which installs PrefLab first
when it is missing); ``--cpu-only`` runs the CPU half on a machine without CUDA.

Checks, each timed and each allowed to fail on its own (the table says what failed):

1. the GPU-marked tests (``pytest -m gpu``), CUDA only;
2. a Pendulum run with ``--device cuda`` (``--device cpu`` in the CPU half);
3. B-Pref's walker PEBBLE with the paper's networks (``bpref/walker_walk-pebble``: SAC actor
   and critic 1,024 × 2, batch 1,024; reward nets 3 × (256, 256, 256)) for the same fixed
   number of agent steps on ``cuda`` and on ``cpu``: agent steps per second after the first
   round (reward fits, relabelling and checkpoints included), each device's and their ratio;
4. a run trained on the GPU resumed on the CPU (CPU → CPU in the CPU half): it continues and
   finishes;
5. the Atari reward model's fit (the convolutional ensemble, 3 members, 84 × 84 × 4 frame
   stacks, 25-step segments; paper 002) on both devices: seconds per gradient step and ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

Row = dict[str, str]
GPU_TEST_FILES = ("tests/test_device_gpu.py",)
"""The modules with ``gpu``-marked tests (collecting all of tests/ would import the extras
that the wheels leave out)."""


def _environment() -> list[str]:
    from preflab.device import jax_backend, torch_build

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return [
        f"- machine: {platform.node()}, {platform.platform()}, Python {platform.python_version()}, "
        f"{torch.get_num_threads()} torch threads",
        f"- {torch_build()}; torch.cuda.is_available(): {torch.cuda.is_available()}; GPU: {gpu}",
        f"- JAX default backend: {jax_backend() or 'JAX not installed'}",
        f"- load average at the end (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
        f" on {os.cpu_count()} CPUs (timings on a busy machine are slower; compare devices within"
        " one table)",
    ]


def _timed(rows: list[Row], check: str, device: str, fn: Callable[[], tuple[str, str]]) -> None:
    """Run one check; a failure is a row of the table, not the end of the script."""
    t0 = time.perf_counter()
    try:
        result, note = fn()
    except Exception as exc:  # every failure is reported in the table
        traceback.print_exc()
        result, note = "FAILED", f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    wall = time.perf_counter() - t0
    rows.append(
        {"check": check, "device": device, "result": result, "wall": f"{wall:.1f}", "note": note}
    )
    print(f"[device_check] {check} on {device}: {result} ({wall:.1f} s) {note}", flush=True)


def gpu_tests() -> tuple[str, str]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "gpu",
            *GPU_TEST_FILES,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = (out.stdout.strip().splitlines() or ["no output"])[-1]
    return ("passed" if out.returncode == 0 else "FAILED"), last


def pendulum(device: str, root: Path) -> tuple[str, str]:
    from preflab.config import TrainConfig
    from preflab.runs import train

    config = TrainConfig(
        total_steps=3000, initial_steps=500, steps_per_round=500, total_labels=40,
        eval_episodes=3, device=device, seed=0,
    )  # fmt: skip
    t0 = time.perf_counter()
    res = train(config, run_dir=root / f"pendulum-{device.replace(':', '')}")
    wall = time.perf_counter() - t0
    return (
        f"{res.env_steps / wall:.0f} steps/s",
        f"SAC, {res.env_steps} steps, 40 labels; true return {res.true_return:.0f}",
    )


def walker_env() -> str:
    try:
        import dm_control  # noqa: F401

        return "dm_control/walker-walk-v0"
    except ImportError:
        return "Walker2d-v5"  # the wheels that travel leave dm_control out (55 MB)


def walker(device: str, steps: int, root: Path, rates: dict[str, float]) -> tuple[str, str]:
    from preflab.config.file import load_config
    from preflab.presets import preset_path
    from preflab.runs import release_run, start_loop

    paper = load_config(preset_path("bpref/walker_walk-pebble"))
    first = 200  # random steps before the first fit (two rounds of segments)
    per_round = max(steps // 4, 50)
    config = dataclasses.replace(
        paper,
        env_id=walker_env(),
        total_steps=first + steps,
        initial_steps=first,
        unsup_steps=0,
        steps_per_round=per_round,
        total_labels=20,
        pool_size=40,
        first_fit_epochs=5,
        fit=dataclasses.replace(paper.fit, epochs=5),
        eval_episodes=1,
        checkpoint_replay_buffer=False,
        device=device,
    )
    stamps: list[tuple[float, int]] = []

    def progress(row: dict[str, Any]) -> None:
        stamps.append((time.perf_counter(), int(row["env_steps"])))

    loop = start_loop(config, root / f"walker-{device.replace(':', '')}", progress=progress)
    try:
        loop.run()
    finally:
        loop.store.close()
        release_run(loop)
    (t0, s0), (t1, s1) = stamps[0], stamps[-1]
    rate = (s1 - s0) / (t1 - t0)
    rates[device] = rate
    return f"{rate:.2f} steps/s", (
        f"{config.env_id}, SAC 1024 × 2, batch 1,024; {s1 - s0} steps timed after the first "
        f"round ({per_round}-step rounds, fits and relabelling included)"
    )


def resume_across(first: str, second: str, root: Path) -> tuple[str, str]:
    from preflab.config import TrainConfig
    from preflab.runs import resume, train

    run = root / f"resume-{first.replace(':', '')}-{second.replace(':', '')}"
    config = TrainConfig(
        total_steps=1500, initial_steps=500, steps_per_round=250, total_labels=20,
        eval_episodes=1, device=first, seed=1,
    )  # fmt: skip
    train(config, run_dir=run)
    more = dataclasses.replace(config, total_steps=2000, device=second)
    res = resume(run, config=more)
    ok = res.env_steps >= 2000 and res.reward_model.device.type == torch.device(second).type
    return ("resumed" if ok else "FAILED"), (
        f"SAC Pendulum: 1,500 steps on {first}, then to {res.env_steps} on {second}; "
        f"true return {res.true_return:.0f}"
    )


def cnn_fit(device: str, rates: dict[str, float]) -> tuple[str, str]:
    from preflab.reward.batch import LabelBatch, SegmentBatch
    from preflab.reward.cnn import ConvRewardEnsemble
    from preflab.reward.ensemble import RewardConfig
    from preflab.reward.trainer import FitConfig, RewardTrainer

    rng = np.random.default_rng(0)
    n, t = 64, 25
    frames = rng.integers(0, 256, size=(n, t, 4, 84, 84), dtype=np.uint8)
    segs = SegmentBatch.from_arrays(frames, np.zeros((n, t, 6), np.float32))
    a = rng.integers(0, n, 128)
    b = (a + rng.integers(1, n, 128)) % n
    labels = LabelBatch.from_arrays(a, b, rng.integers(0, 2, 128).astype(np.float32))
    model = ConvRewardEnsemble((4, 84, 84), 6, RewardConfig(kind="cnn"), seed=0)
    if device != "cpu":
        model = model.to(torch.device(device))
    fit = FitConfig(epochs=2, batch_size=32, min_steps=0)
    trainer = RewardTrainer(model, fit)
    trainer.fit(segs, labels, np.random.default_rng(1), epochs=1)  # warm-up (cuDNN autotune)
    if device != "cpu":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    report = trainer.fit(segs, labels, np.random.default_rng(2), warm=True)
    if device != "cpu":
        torch.cuda.synchronize()
    per_step = (time.perf_counter() - t0) / report.steps
    rates[device] = per_step
    return f"{per_step:.2f} s/step", (
        f"3 conv members, 84×84×4 frames, 25-step segments, 32 labels per step, "
        f"{report.steps} steps timed (after a warm-up fit)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-only", action="store_true", help="the CPU half (no CUDA needed)")
    ap.add_argument("--walker-steps", type=int, default=300, help="agent steps timed per device")
    ap.add_argument("--out", default="", help="the Markdown table (default: print it only)")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not args.cpu_only and not cuda:
        from preflab.device import resolve_device

        resolve_device("cuda")  # says what torch found and what to install; exits with it
    gpu = "cuda" if not args.cpu_only else None
    rows: list[Row] = []
    walk: dict[str, float] = {}
    cnn: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="preflab-device-check-") as tmp:
        root = Path(tmp)
        if gpu:
            _timed(rows, "GPU-marked tests (pytest -m gpu)", gpu, gpu_tests)
        for dev in [d for d in (gpu, "cpu") if d]:
            _timed(
                rows,
                "Pendulum run (preflab train defaults, 3k steps)",
                dev,
                lambda d=dev: pendulum(d, root),
            )
        for dev in [d for d in (gpu, "cpu") if d]:
            _timed(rows, f"B-Pref walker PEBBLE, paper's networks, {args.walker_steps} steps", dev,
                   lambda d=dev: walker(d, args.walker_steps, root, walk))  # fmt: skip
        first = gpu or "cpu"
        _timed(rows, f"resume: trained on {first}, resumed on cpu", f"{first} → cpu",
               lambda: resume_across(first, "cpu", root))  # fmt: skip
        for dev in [d for d in (gpu, "cpu") if d]:
            _timed(rows, "Atari CNN reward fit", dev, lambda d=dev: cnn_fit(d, cnn))
    lines = [
        f"# Device check ({'CPU half' if args.cpu_only else 'GPU and CPU'})",
        "",
        f"Written by `scripts/device_check.sh{' --cpu-only' if args.cpu_only else ''}` "
        f"(scripts/device_check.py) on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        *_environment(),
        "",
        "| check | device | result | wall s | notes |",
        "|---|---|---|---|---|",
        *(
            f"| {r['check']} | {r['device']} | {r['result']} | {r['wall']} | {r['note']} |"
            for r in rows
        ),
        "",
    ]
    if gpu and {"cuda", "cpu"} <= walk.keys():
        lines.append(
            f"Walker PEBBLE, GPU / CPU steps per second: {walk['cuda'] / walk['cpu']:.1f}×."
        )
    if gpu and {"cuda", "cpu"} <= cnn.keys():
        lines.append(f"Atari CNN fit, CPU / GPU seconds per step: {cnn['cpu'] / cnn['cuda']:.1f}×.")
    if not gpu:
        lines.append(
            "No GPU on this machine: the GPU-marked tests, the `--device cuda` runs, the GPU → CPU "
            "resume and the GPU columns are not measured here; run `scripts/device_check.sh` on a "
            "machine with CUDA for them."
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    print(json.dumps({"failed": [r["check"] for r in rows if r["result"] == "FAILED"]}))
    return 1 if any(r["result"] == "FAILED" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

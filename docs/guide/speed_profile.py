"""The measurements of docs/guide/speed.md: one PrefLab run's CPU (optionally under cProfile),
the split of a py-spy raw profile into phases, and the learning-curve plot alone.

    python docs/guide/speed_profile.py run [--prof PATH] [--steps 400]   # default: the bench arm
    python docs/guide/speed_profile.py split RAW                         # py-spy -f raw output
    python docs/guide/speed_profile.py plot
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PHASES = [  # first match along the whole stack wins, in this order
    ("plotting (learning_curves.png)", ["plot_history"]),
    ("checkpoints + model files", ["_checkpoint (", "_write_model_files"]),
    ("final evaluation", ["evaluate_episodes"]),
    ("reward fits", ["_fit (preflab/loop/rounds.py", "fit (preflab/loop/fitting.py"]),
    ("reward relabelling (replay buffer)", ["relabel_replay_buffer", "end_live_phase"]),
    ("queries (select + ask + store)", ["_ask ("]),
    ("rollouts/segments (cut, take)", ["cut_segments", "take_segments"]),
    ("learned reward per env step", ["reward (preflab/reward/ensemble.py", "shaping.py"]),
    ("SAC updates (SBX train)", ["train (sbx/sac/sac.py"]),
    ("action sampling (SBX predict)", ["_sample_action"]),
    ("env steps (Pendulum + wrappers)", ["step (stable_baselines3/common/vec_env", "step_wait"]),
    ("setup (imports, SBX/JAX build)", ["start_loop", "<module>"]),
]


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def run(prof: str | None, steps: int | None) -> None:
    from preflab.config import TrainConfig
    from preflab.rundir.output import RunOutput
    from preflab.runs import start_loop

    if steps is None:  # pendulum-sbx-time-2's PrefLab arm, seed 0
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
        from preflab_bench.pendulum import sac_config

        cfg = sac_config(0, 15000, 100, segment_length=50, eval_episodes=10, backend="sbx")
    else:  # a test-sized run
        cfg = TrainConfig(
            env_id="Pendulum-v1",
            algo="sac",
            seed=0,
            total_steps=steps,
            total_labels=max(6, steps // 100),
            initial_steps=steps // 4,
            steps_per_round=steps // 4,
            segment_length=20,
            eval_episodes=1,
        )
    spent = [0.0]
    finish = RunOutput.finish

    def timed(self: RunOutput, *args: Any, **kwargs: Any) -> None:
        c0 = time.process_time()
        finish(self, *args, **kwargs)
        spent[0] += time.process_time() - c0

    RunOutput.finish = timed  # type: ignore[method-assign]
    profile = cProfile.Profile() if prof else None
    with tempfile.TemporaryDirectory() as d:
        c0, w0 = time.process_time(), time.perf_counter()
        if profile:
            profile.enable()
        result = start_loop(cfg, Path(d) / "run").run()
        if profile and prof:
            profile.disable()
            profile.dump_stats(prof)
        cpu = time.process_time() - c0
    _out(
        f"process CPU {cpu:.2f} s, wall {time.perf_counter() - w0:.2f} s, RunOutput.finish CPU "
        f"{spent[0]:.3f} s ({spent[0] / cpu:.1%}); wall_s {result.wall_s:.2f}, return "
        f"{result.true_return:.3f}, reward accuracy {result.reward_accuracy}"
    )


def split(raw: Path) -> None:
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        total += int(n)
        phase = next((p for p, keys in PHASES if any(k in stack for k in keys)), "other")
        counts[phase] += int(n)
    for phase in [p for p, _ in PHASES] + ["other"]:
        _out(f"| {phase} | {counts[phase] / total:.1%} |")
    _out(f"samples: {total}")


def plot() -> None:
    c0 = time.process_time()
    from preflab.rundir.output import FinalEvaluation, history_figure, plot_history

    history = [
        {"round": i, "env_steps": 1000 * i, "n_labels": 7 * i, "train_true_return": -1000 + 60 * i}
        | {"eval_true_return": math.nan, "reward_accuracy": 0.8, "reward_corr": 0.9}
        for i in range(15)
    ]
    final = FinalEvaluation(env_steps=15000, mean=-100, std=60, episodes=10)
    d = Path(tempfile.mkdtemp())
    c1 = time.process_time()
    plot_history(history, d / "a.png", title="t", final=final)
    c2 = time.process_time()
    fig = history_figure(history, title="t", final=final)
    c3 = time.process_time()
    fig.savefig(d / "b.png", dpi=100)
    c4 = time.process_time()
    _out(
        f"import {c1 - c0:.3f} s, first plot {c2 - c1:.3f} s, second: figure {c3 - c2:.3f} s "
        f"+ savefig {c4 - c3:.3f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--prof", help="write a cProfile to this path")
    r.add_argument("--steps", type=int, help="a test-sized run of this many env steps")
    sub.add_parser("split").add_argument("raw", type=Path)
    sub.add_parser("plot")
    a = ap.parse_args()
    if a.what == "run":
        run(a.prof, a.steps)
    elif a.what == "split":
        split(a.raw)
    else:
        plot()


if __name__ == "__main__":
    main()

"""``preflab train``: run (or resume) a preference-learning loop with progress and a summary table."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import tyro
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from preflab.config import TrainConfig
from preflab.loop import PreferenceLoop, check_run_dir, resume, train


def _progress(total: int) -> tuple[tqdm, Any]:
    bar = tqdm(total=total, unit="step", desc="env steps", dynamic_ncols=True)

    def update(row: dict[str, Any]) -> None:
        bar.update(max(0, int(row["env_steps"]) - bar.n))
        bar.set_postfix(
            labels=row["n_labels"],
            acc=f"{row.get('reward_accuracy', float('nan')):.2f}",
            ret=f"{row.get('train_true_return', float('nan')):.0f}",
        )

    return bar, update


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    table = Table(title=f"PrefLab run {run_dir}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in (
        "env_id",
        "algo",
        "seed",
        "true_return",
        "true_return_std",
        "n_labels",
        "reward_accuracy",
        "reward_corr",
        "env_steps",
        "wall_s",
    ):
        v = summary.get(key)
        table.add_row(key, f"{v:.3f}" if isinstance(v, float) else str(v))
    Console().print(table)
    print(f"outputs: {run_dir}/summary.json, metrics.csv, learning_curves.png, feedback.db")


def main(argv: list[str]) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--run-dir", default="")
    pre.add_argument("--resume", default="")
    known, rest = pre.parse_known_args(argv)
    if known.resume:
        run_dir = Path(known.resume)
        config = check_run_dir(run_dir)
        if rest:
            config = tyro.cli(TrainConfig, args=rest, default=config, prog="preflab train --resume")
        bar, update = _progress(config.total_steps)
        summary = resume(run_dir, config=config, progress=update).summary()
    else:
        config = tyro.cli(
            TrainConfig,
            args=rest,
            prog="preflab train",
            description="Learn a reward from preferences and train a policy on it. "
            "Extra options: --run-dir DIR (default runs/<env>-<algo>-s<seed>-<time>), "
            "--resume DIR (continue a stopped run).",
        )
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = Path(
            known.run_dir
            or f"runs/{config.env_id.replace('/', '_')}-{config.algo}-s{config.seed}-{stamp}"
        )
        bar, update = _progress(config.total_steps)
        summary = train(config, run_dir=run_dir, progress=update).summary()
    bar.close()
    print_summary(summary, run_dir)
    return 0


__all__ = ["PreferenceLoop", "main"]

"""Run directory output: config, metrics CSV per round, plots, summary."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from preflab.errors import ConfigError

METRIC_FIELDS = [
    "round",
    "env_steps",
    "n_labels",
    "n_judgements",
    "train_true_return",
    "eval_true_return",
    "eval_true_return_std",
    "reward_accuracy",
    "reward_corr",
    "reward_train_loss",
    "reward_val_loss",
    "l2",
    "wall_s",
]


class RunOutput:
    """Files of one run: config.json, metrics.csv, summary.json, learning_curves.png."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def start(self, config_json: str) -> None:
        if (self.run_dir / "config.json").exists():
            raise ConfigError(
                f"{self.run_dir} already holds a run; choose a new directory or resume it"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.json").write_text(config_json)

    def discard_if_unstarted(self, *, created: bool) -> bool:
        """After a failed start: remove the run directory when this run created it and no
        round finished (no metrics.csv and no summary.json), so a failed ``train`` leaves no
        half-made run behind. ``created`` = the directory did not exist before the run. Returns
        True when it removed something. A directory that existed before (or a run that got
        past its first round) is never touched."""
        import shutil

        d = self.run_dir
        if not created or not d.is_dir():
            return False
        if (d / "metrics.csv").exists() or (d / "summary.json").exists():
            return False
        shutil.rmtree(d, ignore_errors=True)
        return True

    def append_metrics(self, row: dict[str, Any]) -> None:
        path = self.run_dir / "metrics.csv"
        new = not path.exists()
        with path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=METRIC_FIELDS, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow({k: row.get(k, "") for k in METRIC_FIELDS})

    def rewrite_metrics(self, history: list[dict[str, Any]]) -> None:
        """Replace metrics.csv by ``history`` (a resumed run drops rows after its checkpoint)."""
        path = self.run_dir / "metrics.csv"
        tmp = path.with_suffix(".csv.tmp")
        with tmp.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=METRIC_FIELDS, extrasaction="ignore")
            w.writeheader()
            for row in history:
                w.writerow({k: row.get(k, "") for k in METRIC_FIELDS})
        tmp.replace(path)

    def finish(self, summary: dict[str, Any], history: list[dict[str, Any]]) -> None:
        clean = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in summary.items()
        }
        (self.run_dir / "summary.json").write_text(json.dumps(clean, indent=2))
        plot_history(
            history,
            self.run_dir / "learning_curves.png",
            title=f"{summary.get('env_id')} ({summary.get('algo')}, seed {summary.get('seed')})",
        )


def plot_history(history: list[dict[str, Any]], path: Path, *, title: str = "") -> None:
    """Two panels: true return vs env steps; reward accuracy/correlation vs labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    steps = [h["env_steps"] for h in history]
    ax1.plot(
        steps, [h.get("train_true_return", math.nan) for h in history], label="training episodes"
    )
    ev = [(h["env_steps"], h["eval_true_return"]) for h in history if "eval_true_return" in h]
    if ev:
        ax1.plot(*zip(*ev, strict=True), "o-", label="evaluation")
    ax1.set_xlabel("environment steps")
    ax1.set_ylabel("true return")
    ax1.legend()
    labels = [h["n_labels"] for h in history]
    ax2.plot(labels, [h.get("reward_accuracy", math.nan) for h in history], label="pair accuracy")
    ax2.plot(labels, [h.get("reward_corr", math.nan) for h in history], label="return correlation")
    ax2.set_xlabel("labels")
    ax2.set_ylim(-0.1, 1.05)
    ax2.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

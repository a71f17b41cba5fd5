"""Run directory output: config, metrics CSV per round, plots, summary."""

from __future__ import annotations

import contextlib
import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METRIC_FIELDS = [
    "round",
    "env_steps",
    "n_labels",
    "n_judgements",
    "train_true_return",
    "eval_true_return",
    "eval_true_return_std",
    "eval_success_rate",
    "eval_target_return",
    "reward_accuracy",
    "reward_corr",
    "reward_train_loss",
    "reward_val_loss",
    "l2",
    "pseudo_label_share",
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
        # written whole, then renamed: a sweep (preflab.sweep.runner) or a test watching the run
        # may read it while the run ends
        path = self.run_dir / "summary.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(clean, indent=2))
        tmp.replace(path)
        plot_history(
            history,
            self.run_dir / "learning_curves.png",
            title=f"{summary.get('env_id')} ({summary.get('algo')}, seed {summary.get('seed')})",
            final=_final_evaluation(summary, self.run_dir),
        )


def _final_evaluation(summary: dict[str, Any], run_dir: Path) -> FinalEvaluation | None:
    """The evaluation the run's table reports (summary.json's true_return ± true_return_std),
    with its episode count from config.json when it is readable."""
    mean, std, steps = (summary.get(k) for k in ("true_return", "true_return_std", "env_steps"))
    if not isinstance(mean, int | float) or not isinstance(steps, int | float):
        return None
    episodes = 0
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        episodes = int(json.loads((run_dir / "config.json").read_text()).get("eval_episodes", 0))
    target = summary.get("target_return")
    return FinalEvaluation(
        env_steps=float(steps),
        mean=float(mean),
        std=float(std) if isinstance(std, int | float) else math.nan,
        episodes=episodes,
        target=float(target) if isinstance(target, int | float) else math.nan,
    )


@dataclass(frozen=True, kw_only=True)
class FinalEvaluation:
    """The run's final evaluation, as its table and summary.json report it."""

    env_steps: float
    """Environment steps when it was measured (the x position on the plot)."""
    mean: float
    """Mean true return over the evaluation episodes."""
    std: float
    """Standard deviation of the episodes' true returns (nan when unknown)."""
    episodes: int = 0
    """Number of evaluation episodes (0 = unknown)."""
    target: float = math.nan
    """Mean target return (``--eval-target`` or the teacher's score); NaN without a target."""


def _finite(values: list[Any]) -> bool:
    return any(isinstance(v, int | float) and math.isfinite(v) for v in values)


def plot_history(
    history: list[dict[str, Any]],
    path: Path,
    *,
    title: str = "",
    final: FinalEvaluation | None = None,
) -> None:
    """Two panels. Left: true return vs env steps — the training episodes' returns (a line),
    periodic evaluations (points with std bars) and the final evaluation the run's table
    reports (a marked point with its std bar). Right: the learned reward's pair accuracy and
    return correlation vs labels, or a sentence saying why they are undefined (no labels, or
    only segments of equal true return)."""
    history_figure(history, title=title, final=final).savefig(path, dpi=100)


def history_figure(
    history: list[dict[str, Any]], *, title: str = "", final: FinalEvaluation | None = None
) -> Figure:
    """The figure :func:`plot_history` saves: a bare matplotlib ``Figure``, outside pyplot, so
    that drawing it leaves the caller's backend and open figures as they were (a notebook's
    inline plots go on working after a run)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    ax1, ax2 = fig.subplots(1, 2)
    steps = [h["env_steps"] for h in history]
    train = [h.get("train_true_return", math.nan) for h in history]
    if _finite(train):
        ax1.plot(
            steps,
            train,
            color="tab:blue",
            alpha=0.8,
            label="training episodes (mean of the last 10)",
        )
    ev = [
        (h["env_steps"], h["eval_true_return"], h.get("eval_true_return_std", math.nan))
        for h in history
        if isinstance(h.get("eval_true_return"), int | float)
        and math.isfinite(h["eval_true_return"])
    ]
    if ev:
        x, m, sd = zip(*ev, strict=True)
        ax1.errorbar(
            x,
            m,
            yerr=[v if math.isfinite(v) else 0.0 for v in sd],
            fmt="o--",
            color="tab:green",
            capsize=3,
            label="evaluation during training (mean ± std)",
        )
    if final is not None and math.isfinite(final.mean):
        n = f", {final.episodes} episodes" if final.episodes else ""
        sd_text = f" ± {final.std:.1f}" if math.isfinite(final.std) else ""
        ax1.errorbar(
            [final.env_steps],
            [final.mean],
            yerr=[final.std if math.isfinite(final.std) else 0.0],
            fmt="*",
            markersize=14,
            color="tab:red",
            capsize=5,
            label=f"final evaluation: {final.mean:.1f}{sd_text} (mean ± std{n})",
        )
    if not (_finite(train) or ev or (final is not None and math.isfinite(final.mean))):
        ax1.text(
            0.5, 0.5, "no finished episode yet", ha="center", va="center", transform=ax1.transAxes
        )
    tg = [
        (h["env_steps"], h["eval_target_return"])
        for h in history
        if isinstance(h.get("eval_target_return"), int | float)
    ]
    has_target = bool(tg) or (final is not None and math.isfinite(final.target))
    if has_target:  # what the run was taught, on its own scale
        ax3 = ax1.twinx()
        if final is not None and math.isfinite(final.target):
            tg.append((final.env_steps, final.target))
        x, m = zip(*tg, strict=True)
        ax3.plot(x, m, "D:", color="tab:purple", label="target return (evaluation)")
        ax3.set_ylabel("target return (what the run was taught)", color="tab:purple")
        ax3.legend(fontsize=8, loc="lower right")
    ax1.set_title("true return (the environment's reward)")
    ax1.set_xlabel("environment steps")
    ax1.set_ylabel("episode return")
    if ax1.get_legend_handles_labels()[0]:
        ax1.legend(fontsize=8)
    labels = [h["n_labels"] for h in history]
    acc = [h.get("reward_accuracy", math.nan) for h in history]
    corr = [h.get("reward_corr", math.nan) for h in history]
    ax2.set_title(
        "learned reward vs the target return" if has_target else "learned reward vs true return"
    )
    if _finite(acc) or _finite(corr):
        ax2.plot(labels, acc, "o-", label="pair accuracy")
        ax2.plot(labels, corr, "s-", label="return correlation")
        ax2.set_xlabel("labels")
        ax2.set_ylabel(f"agreement with the {'target' if has_target else 'true'} return")
        ax2.set_ylim(-0.1, 1.05)
        ax2.legend(fontsize=8)
    else:
        no_labels = not any(isinstance(n, int | float) and n > 0 for n in labels)
        text = (
            "no labels: reward accuracy undefined\n(the reward model was never trained)"
            if no_labels
            else "reward accuracy undefined: the compared\nsegments all have equal true return"
            "\n(only ties; nothing to rank)"
        )
        ax2.text(0.5, 0.5, text, ha="center", va="center", transform=ax2.transAxes)
        ax2.set_xticks([])
        ax2.set_yticks([])
    fig.suptitle(title)
    fig.tight_layout()
    return fig

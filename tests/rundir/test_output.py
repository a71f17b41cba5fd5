"""A run's plot: the return panel shows the evaluation the run's table reports (the final
evaluation as a marked point with its std bar) beside the training episodes, and the reward
panel says in words why its metrics are undefined (no labels; only ties)."""

from __future__ import annotations

import json
import math
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import pytest

from preflab.rundir.output import FinalEvaluation, RunOutput, history_figure, plot_history


def _row(steps: int, labels: int, ret: float, acc: float, corr: float) -> dict[str, Any]:
    return {
        "round": steps // 200,
        "env_steps": steps,
        "n_labels": labels,
        "train_true_return": ret,
        "reward_accuracy": acc,
        "reward_corr": corr,
    }


HISTORY = [_row(200, 3, math.nan, 0.8, 0.7), _row(400, 8, -1300.0, 0.85, 0.9)]


def _texts(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_final_evaluation_is_a_marked_point_with_its_std_bar() -> None:
    final = FinalEvaluation(env_steps=400, mean=-109.0, std=12.5, episodes=10)
    fig = history_figure(HISTORY, title="t", final=final)
    ret, reward = fig.axes
    legend = [t.get_text() for t in ret.get_legend().get_texts()]
    assert legend == [
        "training episodes (mean of the last 10)",
        "final evaluation: -109.0 ± 12.5 (mean ± std, 10 episodes)",
    ]
    # the marked point sits at the reported mean, its bar spans mean ± std
    star = [ln for ln in ret.get_lines() if ln.get_marker() == "*"]
    assert len(star) == 1 and list(star[0].get_ydata()) == [-109.0]
    (bar,) = [c for c in ret.collections if c.get_segments()]
    (seg,) = bar.get_segments()
    assert sorted(seg[:, 1]) == pytest.approx([-121.5, -96.5])
    assert "true return" in ret.get_title() and ret.get_xlabel() == "environment steps"
    assert reward.get_xlabel() == "labels" and not _texts(reward)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [(0, "no labels: reward accuracy undefined"), (12, "equal true return")],
)
def test_nan_reward_metrics_are_explained_in_words(labels: int, expected: str) -> None:
    history = [_row(200, labels, math.nan, math.nan, math.nan)]
    fig = history_figure(history, final=FinalEvaluation(env_steps=200, mean=-5.0, std=0.0))
    reward = fig.axes[1]
    assert any(expected in t for t in _texts(reward)), _texts(reward)
    assert not reward.get_lines() and reward.get_legend() is None


def test_a_runs_plot_leaves_the_callers_backend_and_figures_alone(tmp_path) -> None:
    """A researcher trains from a notebook: drawing the run's plot must not switch their
    matplotlib backend (it was switched to Agg) nor open or close a pyplot figure."""
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # a backend of the user's that is not Agg
    mine = plt.figure()
    open_before = plt.get_fignums()  # mine, and any an earlier test in this process left open
    try:
        plot_history(
            HISTORY, tmp_path / "c.png", final=FinalEvaluation(env_steps=400, mean=-1.0, std=0.5)
        )
        assert matplotlib.get_backend() == "svg"
        assert mine.number in open_before and plt.get_fignums() == open_before
        assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        plt.close(mine)
        matplotlib.use(before)


def test_finish_plots_the_summary_evaluation(tmp_path) -> None:
    out = RunOutput(tmp_path / "run")
    out.start(json.dumps({"eval_episodes": 4}))
    summary = {"env_id": "E", "algo": "ppo", "seed": 0, "true_return": -2.0}
    summary |= {"true_return_std": 1.0, "env_steps": 400}
    out.finish(summary, HISTORY)
    assert (tmp_path / "run" / "learning_curves.png").stat().st_size > 1000
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["true_return"] == -2.0


def test_a_runs_png_is_drawn_at_its_end_from_the_final_data(tmp_path) -> None:
    """The plot a user finds after a run is the one drawn from its final history and the
    evaluation its table reports (summary.json): redrawing both gives the same pixels."""
    from matplotlib.image import imread

    from preflab.config import TrainConfig
    from preflab.rundir.output import _final_evaluation
    from preflab.runs import start_loop

    cfg = TrainConfig(
        env_id="Pendulum-v1",
        algo="sac",
        seed=0,
        total_steps=400,
        total_labels=6,
        # three rounds (after 300, 350 and 400 steps), SAC's 100 updates after the first 300
        # (with 200 + 100 + 100: 200 updates, 0.6 s of CPU more, the same three rows)
        initial_steps=300,
        steps_per_round=50,
        segment_length=20,
        eval_episodes=1,
    )
    run = tmp_path / "run"
    loop = start_loop(cfg, run)
    result = loop.run()
    summary = json.loads((run / "summary.json").read_text())
    history = loop.state.history
    assert history[-1]["env_steps"] == summary["env_steps"] == result.env_steps == 400
    final = _final_evaluation(summary, run)
    assert final is not None and final.mean == pytest.approx(result.true_return)
    plot_history(history, tmp_path / "redrawn.png", title="Pendulum-v1 (sac, seed 0)", final=final)
    seen, redrawn = imread(run / "learning_curves.png"), imread(tmp_path / "redrawn.png")
    assert seen.shape == redrawn.shape and (seen == redrawn).all()

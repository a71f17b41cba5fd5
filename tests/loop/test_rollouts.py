"""The loop's rollouts and the episodes they finish: B-Pref's margin (the mean true return of the
last 10 finished episodes × segment length / episode limit) counts every episode that ended, the
random steps' first (B-Pref's train_PEBBLE.py appends its seed steps' episodes too), in the order
they ended, across PEBBLE's pre-training and the agent's first ``learn``. A real (smoke) run on
Pendulum (200-step episodes), the true returns computed from the recorded segments."""

from __future__ import annotations

import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from preflab.config import TrainConfig
from preflab.loop import PreferenceLoop
from preflab.runs import release_run, start_loop
from preflab.sources.teacher import bpref_teacher
from tests.run_support import run_killable

LIMIT = 200
"""Pendulum-v1's episode limit."""


def _run_spying_margins(config: TrainConfig, run_dir: Path) -> tuple[PreferenceLoop, list[float]]:
    """Run ``config`` to its end; the margins the loop set before each round's queries."""
    loop = start_loop(config, run_dir)
    teacher = loop.hooks.margin_teacher
    assert teacher is not None and teacher.uses_margin
    margins: list[float] = []
    set_margin = teacher.set_margin

    def spy(margin: float) -> None:
        margins.append(margin)
        set_margin(margin)

    teacher.set_margin = spy  # type: ignore[method-assign]
    try:
        loop.run()
    finally:
        loop.store.close()
        release_run(loop)
    return loop, margins


def _episode_returns(loop: PreferenceLoop, config: TrainConfig) -> list[float]:
    """The true return of every whole episode the recorder cut into segments, in the order
    they ended (one env: episode ids count up), summed from the segments' true rewards."""
    steps: dict[int, int] = defaultdict(int)
    returns: dict[int, float] = defaultdict(float)
    for seg in loop.pool:
        steps[seg.episode] += len(seg.true_rewards)
        returns[seg.episode] += float(np.sum(seg.true_rewards, dtype=np.float64))
    return [returns[e] for e in sorted(steps) if steps[e] == LIMIT]


def _margin(episode_returns: list[float], config: TrainConfig) -> float:
    """B-Pref's ``new_margin`` over these episodes (the last ten)."""
    return float(np.mean(episode_returns[-10:])) * config.segment_length / LIMIT


@pytest.mark.parametrize("name", ["bpref-skip", "bpref-equal"])
def test_round_0_margin_counts_the_random_steps_episodes_and_they_stay_counted(
    name: str, tmp_path: Path
) -> None:
    """No pre-training: round 0 asks after random steps only (12 whole episodes), and its margin
    is theirs (the last ten), not NaN; after the agent's first ``learn`` (one more episode)
    round 1's margin still counts the random episodes before it."""
    config = TrainConfig.smoke(
        teacher=bpref_teacher(name), initial_steps=12 * LIMIT, total_steps=13 * LIMIT
    )
    loop, margins = _run_spying_margins(config, tmp_path / "run")
    returns = _episode_returns(loop, config)
    assert len(returns) == 13  # 12 random episodes, then 1 of the agent's training
    assert len(margins) == 2 and all(np.isfinite(margins))
    assert margins[0] == pytest.approx(_margin(returns[:12], config), rel=1e-5)
    assert margins[1] == pytest.approx(_margin(returns, config), rel=1e-5)
    ends = [e["r"] for e in loop.agent.ep_info_buffer]  # what the checkpoint holds
    assert ends == pytest.approx(returns, rel=1e-5)


def test_pebble_margin_counts_random_and_pre_training_episodes(tmp_path: Path) -> None:
    """PEBBLE: 2 random episodes then 1 of unsupervised pre-training (SB3's first ``learn``)
    before round 0: its margin is the mean of all three, in the order they ended; round 1's
    (one training episode more) the mean of all four."""
    extra: dict[str, Any] = {"algo": "sac", "unsup_steps": LIMIT}
    config = TrainConfig.smoke(
        teacher=bpref_teacher("skip"), initial_steps=2 * LIMIT, total_steps=4 * LIMIT, **extra
    )
    loop, margins = _run_spying_margins(config, tmp_path / "run")
    returns = _episode_returns(loop, config)
    assert len(returns) == 4
    assert margins == [
        pytest.approx(_margin(returns[:3], config), rel=1e-5),
        pytest.approx(_margin(returns, config), rel=1e-5),
    ]
    assert [e["r"] for e in loop.agent.ep_info_buffer] == pytest.approx(returns, rel=1e-5)


RUN = """
import sys
from preflab.config import TrainConfig
from preflab.runs import resume, train
from preflab.sources.teacher import SyntheticTeacher, bpref_teacher
run_dir, margins, mode = sys.argv[1:4]
set_margin = SyntheticTeacher.set_margin
def spy(self, margin):
    with open(margins, "a") as f:
        f.write(repr(float(margin)) + "\\n")
    set_margin(self, margin)
SyntheticTeacher.set_margin = spy
if mode == "resume":
    resume(run_dir)
else:
    # 4 random episodes, then 3 rounds of one training episode each
    train(
        TrainConfig.smoke(teacher=bpref_teacher("skip"), initial_steps=800, total_steps=1400),
        run_dir=run_dir,
    )
"""


def _margins_of(run_dir: Path, mode: str, failpoint: str | None = None) -> list[float]:
    """The margins a process running (or resuming) the run sets; killed at ``failpoint``."""
    out = run_dir.parent / f"margins-{mode}.txt"
    proc = run_killable(RUN, str(run_dir), str(out), mode, failpoint=failpoint)
    assert proc.returncode == (-signal.SIGKILL if failpoint else 0)
    return [float(line) for line in out.read_text().split()]


def test_a_run_resumed_before_its_first_learn_sets_the_same_margins(tmp_path: Path) -> None:
    """Killed after round 0's checkpoint (the random steps' episodes in it), before the agent's
    first ``learn``: the resumed run sets the very margins of an uninterrupted one."""
    want = _margins_of(tmp_path / "ref" / "run", "train")
    assert len(want) == 4 and all(np.isfinite(want))
    run = tmp_path / "killed" / "run"
    assert _margins_of(run, "train", failpoint="round_end:1") == want[:1]
    assert _margins_of(run, "resume") == want[1:]

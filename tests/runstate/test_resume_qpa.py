"""Exact resume with QPA on (issue 59): policy-aligned queries, hybrid experience replay and the
snippet augmentation of the fit. A SAC run killed mid-run and resumed equals an uninterrupted one
bit for bit: the hybrid buffer's own generator and its switch back to uniform batches are in the
checkpoint."""

from __future__ import annotations

import signal
from pathlib import Path

import torch

from preflab.runstate.checkpointer import Checkpointer
from tests.run_support import run_killable
from tests.runstate.test_resume_exact import _final_weights, _metrics, _store_rows

RUN = """
import sys
from preflab.config import TrainConfig
from preflab.policy.replay_config import ReplayConfig
from preflab.reward import FitConfig
from preflab.reward.qpa_crops import SnippetConfig
from preflab.runs import resume, train
run_dir, mode = sys.argv[1:3]
if mode == "resume":
    resume(run_dir)
else:
    # Pendulum's 200-step episodes: a window of 2 episodes for queries, 1 for replay; 12
    # labels spent by round 2 of 3, so the buffer is back to uniform batches by the end
    train(
        TrainConfig.smoke(
            algo="sac",
            selector="policy-aligned",
            aligned_episodes=2,
            replay=ReplayConfig(hybrid=True, recent_episodes=1),
            fit=FitConfig(epochs=3, snippets=SnippetConfig(copies=4)),
            agent_kwargs='{"batch_size": 32, "learning_starts": 100}',
        ),
        run_dir=run_dir,
    )
"""


def _run(run_dir: Path, mode: str, failpoint: str | None = None) -> int:
    return run_killable(RUN, str(run_dir), mode, failpoint=failpoint).returncode


def test_kill_and_resume_with_qpa_equals_uninterrupted(tmp_path: Path) -> None:
    ref, run = tmp_path / "ref", tmp_path / "run"
    assert _run(ref, "train") == 0
    assert _run(run, "train", failpoint="judgements_stored:2") == -signal.SIGKILL
    assert _run(run, "resume") == 0
    assert _store_rows(run) == _store_rows(ref)
    assert _metrics(run) == _metrics(ref)
    got, want = _final_weights(run), _final_weights(ref)
    assert want and got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in want)  # bit for bit
    sampler = Checkpointer(ref).load().state["agent"]["replay_buffer"]["sampler"]
    assert sampler["active"] is False  # the label budget was spent: uniform batches at the end
    queries = _store_rows(ref)["queries"]
    assert queries and all(q[1] == "pair" for q in queries)

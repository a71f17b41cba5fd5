"""Exact resume on the SBX backend (a module of its own, so that it runs beside the SB3 cases
on the other test worker): SIGKILL after PEBBLE's pre-training and the critic reset, resume,
and compare with an uninterrupted run bit for bit; the run then loads for inference."""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.runstate.test_resume_exact import (
    _final_agent,
    _final_weights,
    _metrics,
    _run,
    _store_rows,
)

# a mark, not importorskip: importing sbx (JAX, Flax, Optax) at collection costs every test worker
# seconds of CPU, and only the worker that runs this module needs it
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sbx") is None, reason="the sbx extra (SBX, JAX) is not installed"
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("ref-sbx") / "run"
    assert _run("sbx", run, "train") == 0
    return run


def test_kill_and_resume_equals_uninterrupted(reference: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert _run("sbx", run, "train", failpoint="judgements_stored:2") == -signal.SIGKILL
    assert _run("sbx", run, "resume") == 0
    assert _store_rows(run) == _store_rows(reference)
    assert _metrics(run) == _metrics(reference)
    got, want = _final_weights(run), _final_weights(reference)
    assert want and got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in want)  # the JAX state, bit for bit


def test_the_run_loads_for_inference_with_its_trained_weights(reference: Path) -> None:
    """load_run builds the SBX agent from the run's config and puts its JAX state back."""
    from preflab.runs import load_run
    from preflab.runstate.jaxstate import capture_jax

    run = load_run(reference)
    got, want = capture_jax(run.agent), _final_agent(reference)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    action, _ = run.agent.predict(np.zeros(3, np.float32), deterministic=True)
    assert action.shape == (1,)


def test_sbx_ppo_trains_on_the_learned_reward_and_resumes_exactly(tmp_path: Path) -> None:
    """SBX's PPO hands its rollout callbacks JAX values as arrays: the relabelling callback
    (preflab.policy.rollout_relabel) recomputed the advantages with SB3's buffer, which needs a
    tensor, and every SBX PPO run with a learned reward failed at its first rollout."""
    ref, run = tmp_path / "ref", tmp_path / "run"
    assert _run("sbx-ppo", ref, "train") == 0
    assert _run("sbx-ppo", run, "train", failpoint="judgements_stored:2") == -signal.SIGKILL
    assert _run("sbx-ppo", run, "resume") == 0
    assert _store_rows(run) == _store_rows(ref)
    assert _metrics(run) == _metrics(ref)
    got, want = _final_weights(run), _final_weights(ref)
    assert want and got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in want)

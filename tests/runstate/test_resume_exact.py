"""Exact resume: SIGKILL at every write point, resume, and compare with an uninterrupted run."""

from __future__ import annotations

import csv
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from preflab.runstate.checkpointer import Checkpointer
from preflab.store import FeedbackStore
from tests.run_support import run_killable

RUN = """
import sys
from preflab.config import TrainConfig
from preflab.runs import resume, train
from preflab.policy.termination import TerminationConfig
algo, run_dir, mode = sys.argv[1:4]
# "absorbing": Hopper falls within a few dozen random steps, so the absorbing tail (and its
# per-env episode step counters) is in play when the run is killed
from preflab.policy.shaping import PolicyRewardConfig
from preflab.reward import FitConfig
from preflab.reward.robust import RimeConfig
from preflab.reward.reed import ReedConfig
extra = (
    dict(env_id="Hopper-v5", termination=TerminationConfig(absorbing=True), algo="ppo")
    if algo == "absorbing"
    # issue #28's options together: PEBBLE's pre-training, SURF's pseudo-labels and crops,
    # RUNE's decaying bonus (its weight follows the restored env step count); and RIME's robust
    # fit with its warm start (issue #59: its moving bound and decay count carry across fits);
    # REED's pre-training on the replay buffer (issue #59: its heads carry across fits)
    else dict(
        algo="sac",
        unsup_steps=300,
        fit=FitConfig(
            semi_ratio=2,
            crop=3,
            rime=RimeConfig(on=True, warm_start_steps=20, warm_start_batch=64),
            reed=ReedConfig(on=True, steps=10, batch_size=16),
        ),
        policy_reward=PolicyRewardConfig(disagreement_bonus=0.05, bonus_decay=1e-4),
    )
    if algo == "surf"
    # the SBX backend (tests/runstate/test_resume_sbx.py): JAX train states, optimiser states
    # and PRNG keys, and PEBBLE's critic reset of a JAX agent, with its updates after it
    else dict(algo="sac", backend="sbx", unsup_steps=300, reset_updates=5)
    if algo == "sbx"
    # SBX's PPO: its rollouts relabelled by PrefLab's callback (JAX values, not tensors)
    else dict(algo="ppo", backend="sbx")
    if algo == "sbx-ppo"
    else dict(env_id="CartPole-v1", algo="dqn", agent_kwargs="")
    if algo == "dqn"
    # routing (issue 58): the router's generator, budgets used, calibration records and held
    # AI answers, the simulated judge's and the teacher's states; a low bar so the AI answers
    else dict(
        algo="ppo",
        source="route",
        total_labels=24,
        route=__import__("preflab.sources.routing.config", fromlist=["RoutingConfig"]).RoutingConfig(
            min_calibration=3, target_error=0.45, level=0.8, calibration_share=0.3
        ),
    )
    if algo == "route"
    else dict(algo=algo)
)
if mode == "resume":
    resume(run_dir)
else:
    train(TrainConfig.smoke(teacher={teacher}, **extra), run_dir=run_dir)
"""
NOISY = "__import__('preflab.sources.teacher', fromlist=['TeacherConfig']).TeacherConfig(beta=1.0, epsilon=0.1)"


def _run(algo: str, run_dir: Path, mode: str, failpoint: str | None = None) -> int:
    code = RUN.format(teacher=NOISY)
    return run_killable(code, algo, str(run_dir), mode, failpoint=failpoint).returncode


def _store_rows(run_dir: Path) -> dict[str, list[tuple]]:
    store = FeedbackStore(run_dir / "feedback.db")
    try:
        judgements = [j for _seq, j in store.answers.judgements()]
        return {
            "segments": sorted(s.id for s in store.segments.all()),
            "queries": sorted((q.id, q.kind, q.a, q.b, q.round) for q in store.queries.all()),
            "judgements": sorted((j.id, j.query_id, j.annotator_id, j.p) for j in judgements),
            "judgement_ids": [j.id for j in judgements],
        }
    finally:
        store.close()


def _final_agent(run_dir: Path) -> dict[str, torch.Tensor]:
    """The policy's weights in the run's last checkpoint (an SBX agent's whole JAX state)."""
    agent = Checkpointer(run_dir).load().tensors["agent"]
    return dict(agent["params"].get("policy", {})) | dict(agent.get("jax", {}))


def _final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    """The policy's weights and the reward model's (``ensemble.*``) in the run's last
    checkpoint."""
    ensemble = Checkpointer(run_dir).load().tensors["ensemble"]
    return _final_agent(run_dir) | {f"ensemble.{k}": v for k, v in ensemble.items()}


def _metrics(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open() as f:
        return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]


class References(dict[str, Path]):
    """The uninterrupted run of each set-up, trained on first use (a set-up whose tests are all
    slow is not trained in the default run)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        super().__init__()
        self.factory = factory

    def __missing__(self, algo: str) -> Path:
        d = self.factory.mktemp(f"ref-{algo}") / "run"
        assert _run(algo, d, "train") == 0
        self[algo] = d
        return d


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> References:
    return References(tmp_path_factory)


# slow: every kill-and-resume test below also compares a second process's run with the reference
@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_same_seed_gives_identical_metrics(
    algo: str, reference: References, tmp_path: Path
) -> None:
    again = tmp_path / "run"
    assert _run(algo, again, "train") == 0
    assert _metrics(again) == _metrics(reference[algo])
    assert _store_rows(again) == _store_rows(reference[algo])


@pytest.mark.parametrize(
    ("algo", "point"),
    [
        ("ppo", "queries_stored:1"),  # round 0: queries stored, not yet answered, no checkpoint
        ("ppo", "judgements_stored:1"),  # round 0: labels stored before the first checkpoint
        # mid-run: after a store commit, before the checkpoint (slow: the surf case below is a
        # SAC run with more state, killed at the same point)
        pytest.param("sac", "judgements_stored:2", marks=pytest.mark.slow),
        # in the middle of writing a checkpoint: a SAC run with every option of issue #28 (its
        # plain SAC twin is slow); the surf run's second is its pre-training checkpoint, its
        # third round 0's
        ("surf", "checkpoint_partial:3"),
        pytest.param("sac", "checkpoint_partial:2", marks=pytest.mark.slow),
        # between rounds (slow: the absorbing case below is a PPO run killed at the same point)
        pytest.param("ppo", "round_end:2", marks=pytest.mark.slow),
        ("absorbing", "round_end:2"),  # episode steps of the absorbing tail come back
        ("dqn", "judgements_stored:2"),  # DQN: replay buffer, ε and target-update counter
        ("surf", "judgements_stored:2"),  # pre-training, pseudo-labels, crops, RUNE's bonus
        ("route", "judgements_stored:2"),  # routing: its counts, calibration and answerers
    ],
)
def test_kill_and_resume_equals_uninterrupted(
    algo: str, point: str, reference: References, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert _run(algo, run, "train", failpoint=point) == -signal.SIGKILL
    assert _run(algo, run, "resume") == 0
    got, want = _store_rows(run), _store_rows(reference[algo])
    assert len(set(got["judgement_ids"])) == len(got["judgement_ids"])  # nothing duplicated
    assert got == want  # nothing lost, and the very same rows as without the kill
    assert _metrics(run) == _metrics(reference[algo])
    want_agent = _final_weights(reference[algo])
    got_agent = _final_weights(run)
    assert got_agent.keys() == want_agent.keys()
    assert all(torch.equal(got_agent[k], want_agent[k]) for k in want_agent)  # bit for bit
    assert (run / "summary.json").exists()


def test_a_surf_run_reports_its_pseudo_label_share(reference: References) -> None:
    """metrics.csv carries the share of unlabelled pairs confident enough to pseudo-label."""
    shares = [float(r["pseudo_label_share"]) for r in _metrics(reference["surf"])]
    assert shares and all(0.0 <= s <= 1.0 for s in shares)


def test_a_rime_run_checkpoints_its_filter(reference: References) -> None:
    """The surf set-up runs RIME too: its filter's statistics are in the last checkpoint, with
    every epoch of every fit counted."""
    robust = Checkpointer(reference["surf"]).load().state["loop"]["robust"]
    assert robust["epochs"] > 0 and robust["rho"] > 0.0


def test_a_reed_run_checkpoints_its_heads(reference: References) -> None:
    """The surf set-up runs REED's pre-training too: its heads are in the last checkpoint and
    the rounds' metrics carry the pre-training's loss."""
    ckpt = Checkpointer(reference["surf"]).load()
    assert set(ckpt.tensors["reed"]) == {"pred_w", "pred_b", "proj_w", "proj_b"}
    losses = [r["reed_loss"] for r in ckpt.state["loop"]["history"] if "reed_loss" in r]
    assert losses and all(np.isfinite(losses))

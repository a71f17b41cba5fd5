"""What a checkpoint holds, and putting it back.

The parts' share (:func:`capture_parts`): the agent (optimisers and replay buffer), the envs, the
recorder, the learned-reward env, the absorbing tail, the reward ensemble and its optimiser (and
REED's heads), the source's and selector's own state and the global generators. The loop's share
(:func:`capture_run`): its round state, the loop's generator, the reward fit's ℓ2 and RIME's
statistics, the warnings said, what was asked (:class:`preflab.loop.asking.Asker`) and the
segment pool (:class:`preflab.loop.rollouts.Rollouts`). The loop decides when to write one
(:meth:`preflab.loop.PreferenceLoop._checkpoint`): at each round's end, and within round 0 after
PEBBLE's pre-training and after RIME's warm start (its phase, :data:`PRETRAINED` or
:data:`WARM_STARTED`, in the loop's state; a checkpoint without one, older ones included, is a
round's end).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from preflab.config import TrainConfig
from preflab.device import cuda_rng_states, set_cuda_rng_states
from preflab.errors import StoreError
from preflab.loop.asking import Asker
from preflab.loop.results import LoopState, RunParts, selector_state
from preflab.loop.rollouts import Rollouts
from preflab.rundir.tracking import policy_logger
from preflab.runstate import Checkpoint
from preflab.runstate.agentstate import capture_agent, restore_agent
from preflab.runstate.checkpointer import global_rng_state, set_global_rng_state
from preflab.runstate.codec import plain_attrs, set_attrs
from preflab.runstate.envstate import capture_vec_env, restore_vec_env

log = logging.getLogger(__name__)

PRETRAINED = "pretrained"
"""The phase of a checkpoint within round 0 after its random steps and PEBBLE's unsupervised
pre-training, before its queries: a resumed run goes on from the queries."""
WARM_STARTED = "warmstarted"
"""The phase of a checkpoint within round 0 after :data:`PRETRAINED` and RIME's warm start of the
reward model (``fit.rime.warm_start_steps``), before its queries."""
PHASES = ("", PRETRAINED, WARM_STARTED)
"""The phases a checkpoint may name, in the order a round goes through them ('': a round's end,
or the fresh start)."""
AFTER = {
    PRETRAINED: " after pre-training (its queries come next)",
    WARM_STARTED: " after pre-training and RIME's warm start (its queries come next)",
}
"""What the log says of a run resumed within round 0, by phase."""


def selector_is_source(parts: RunParts) -> bool:
    """True when one object selects and answers (a simulated decision maker): its state is
    saved once, as the source's."""
    return id(parts.selector) == id(parts.source)


def capture_parts(
    parts: RunParts, arrays: dict[str, np.ndarray], *, replay_buffer: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The parts' checkpoint state (JSON, with large arrays put into ``arrays``) and tensors."""
    agent_meta, agent_tensors = capture_agent(parts.agent, arrays, replay_buffer=replay_buffer)
    rng_state, torch_rng = global_rng_state()
    state = {
        "source": parts.source.state(),
        "selector": None if selector_is_source(parts) else selector_state(parts.selector),
        "globals": rng_state,
        "agent": agent_meta,
        "env": capture_vec_env(parts.recorder.venv, arrays),
        "recorder": plain_attrs(parts.recorder, arrays, "recorder"),
        "reward_env": plain_attrs(parts.venv, arrays, "reward_env"),
        # the absorbing tail's per-env episode step counters (how long the tail lasts)
        "tail": None if parts.tail is None else plain_attrs(parts.tail, arrays, "tail"),
    }
    tensors: dict[str, Any] = {
        "agent": agent_tensors,
        "ensemble": parts.reward.model.state_dict(),
        "reward_optimizer": parts.trainer.optimizer.state_dict(),
        "torch_rng": torch_rng,
    }
    reed = parts.trainer.reed_state()  # REED's heads (once made)
    if reed is not None:
        tensors["reed"] = reed
    cuda_rng = cuda_rng_states()  # only when this process has used CUDA
    if cuda_rng is not None:
        tensors["cuda_rng"] = cuda_rng
    return state, tensors


def restore_parts(parts: RunParts, ckpt: Checkpoint, run_dir: Path) -> None:
    """Put the parts back as :func:`capture_parts` saw them; a StoreError when the checkpoint
    does not fit the parts built from the run's config."""
    st, arrays = ckpt.state, ckpt.arrays
    try:
        parts.reward.model.load_state_dict(ckpt.tensors["ensemble"])
        parts.trainer.optimizer.load_state_dict(ckpt.tensors["reward_optimizer"])
        parts.trainer.load_reed_state(ckpt.tensors.get("reed"))
        restore_agent(parts.agent, st["agent"], ckpt.tensors["agent"], arrays)
        restore_vec_env(parts.recorder.venv, st["env"], arrays)
        set_attrs(parts.recorder, st["recorder"], arrays)
        set_attrs(parts.venv, st["reward_env"], arrays)
        if parts.tail is not None:
            set_attrs(parts.tail, st["tail"], arrays)
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"the checkpoint in {run_dir} does not fit this run's config (different "
            f"environment, agent or reward network?): {str(exc).splitlines()[0]}"
        ) from exc
    if not st["env"]["exact"]:
        log.warning(
            "the environments' state could not be saved exactly; the resumed run starts "
            "new episodes and will not repeat an uninterrupted run step for step"
        )
        parts.agent._last_obs = None
    parts.source.load_state(st["source"])
    if st.get("selector") is not None and not selector_is_source(parts):
        parts.selector.load_state(st["selector"])  # type: ignore[attr-defined]
    torch_rng: torch.Tensor = ckpt.tensors["torch_rng"]
    set_global_rng_state(st["globals"], torch_rng)
    set_cuda_rng_states(ckpt.tensors.get("cuda_rng"))  # same GPUs: exact; else left as seeded


def fresh_checkpoint(config: TrainConfig) -> Checkpoint:
    """The checkpoint of a run as built from its config: nothing to restore but the store."""
    return Checkpoint(state={"fresh": True, "env_id": config.env_id})


def capture_run(
    parts: RunParts,
    config: TrainConfig,
    state: LoopState,
    wall_s: float,
    asker: Asker,
    rollouts: Rollouts,
    phase: str = "",
) -> Checkpoint:
    """The whole checkpoint of a run (after the store commits it refers to): the parts' share
    and the loop's (``wall_s``: training wall time so far; ``phase``: of round ``state.round``
    done, one of :data:`PHASES`)."""
    arrays: dict[str, np.ndarray] = {}
    parts_state, tensors = capture_parts(
        parts, arrays, replay_buffer=config.checkpoint_replay_buffer
    )
    pool = rollouts.state()  # pool segments' arrays go to the store first
    asked = asker.state()
    loop = {
        "round": state.round,
        "phase": phase,
        "wall_s": wall_s,
        "history": state.history,
        "fitted": parts.reward.fitted,
        "rng": parts.rng.bit_generator.state,
        "l2": parts.trainer.l2,
        "robust": parts.trainer.robust_state(),  # RIME's statistics (None when off)
        "warnings": parts.warnings.state(),
        "pool": pool,
        # all of the asker's state, as Asker.load_state reads it back (n_labels, n_ties,
        # queries, rating_queries, judgement_seq, withdrawn, dropped)
        **asked,
    }
    full = {"fresh": False, "env_id": config.env_id, "loop": loop, **parts_state}
    return Checkpoint(full, tensors, arrays)


def restore_run(
    parts: RunParts,
    ckpt: Checkpoint,
    run_dir: Path,
    config: TrainConfig,
    asker: Asker,
    rollouts: Rollouts,
) -> tuple[LoopState, str]:
    """Put the run back as :func:`capture_run` (or :func:`fresh_checkpoint`) saw it, and say so
    in the log; the loop's round state and the phase of its round done
    (:func:`checkpoint_phase`). A StoreError when the checkpoint is another env's or names a
    phase this PrefLab does not know (nothing is changed then)."""
    st = ckpt.state
    if st.get("env_id") != config.env_id:
        raise StoreError(
            f"the checkpoint in {run_dir} is for env {st.get('env_id')!r}, but "
            f"config.json says {config.env_id!r}; the run directory was mixed up"
        )
    phase = checkpoint_phase(ckpt, run_dir)
    asker.note_stored_queries()
    state = LoopState()
    if not st["fresh"]:
        restore_parts(parts, ckpt, run_dir)
        for tracker in parts.trackers:  # what was logged after the checkpoint comes again
            tracker.resumed(parts.recorder.steps)
        if "tensorboard" in config.log:  # and the policy's own metrics, at its timesteps
            parts.agent.logger.close()
            parts.agent.set_logger(policy_logger(run_dir, resumed_at=parts.agent.num_timesteps))
        loop = st["loop"]
        state = LoopState(round=loop["round"], wall_s=loop["wall_s"], history=loop["history"])
        parts.reward.fitted = loop["fitted"]
        parts.warnings.load_state(loop.get("warnings", []))
        parts.rng.bit_generator.state = loop["rng"]
        parts.trainer.set_l2(loop["l2"])
        parts.trainer.load_robust_state(loop.get("robust"))
        asker.load_state(loop)
        rollouts.load_state(loop["pool"])
    asker.resume_judgements(st.get("loop", {}).get("judgement_seq", 0))
    log.info(
        "resumed %s at round %d with %d judgements%s",
        run_dir,
        state.round,
        len(asker.judgements),
        AFTER.get(phase, ""),
    )
    return state, phase


def checkpoint_phase(ckpt: Checkpoint, run_dir: Path) -> str:
    """The phase of its round a checkpoint was written after (:data:`PHASES`; '' for a round's
    end, the fresh start and a checkpoint older than phases); a StoreError for one this PrefLab
    does not know."""
    loop = ckpt.state.get("loop")
    phase = loop.get("phase", "") if isinstance(loop, dict) else ""
    if phase not in PHASES:
        raise StoreError(
            f"the checkpoint in {run_dir} was written after phase {phase!r} of its round, which "
            f"this PrefLab does not know ({', '.join(repr(p) for p in PHASES[1:])}); resume it "
            "with the PrefLab version that wrote it"
        )
    return str(phase)

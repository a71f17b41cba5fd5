"""Learning the reward: labels refit the reward ensemble, which is re-standardised on the newest
segments, and the policy's view of it follows (an off-policy agent's replay buffer relabelled,
PEBBLE's critic reset after the first fit unless RIME's warm start keeps it, with
``reset_updates`` gradient updates after it, the live phase
ended when due) (:class:`RewardFit`)."""

from __future__ import annotations

import numpy as np
import torch

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.loop.results import RunParts
from preflab.policy.agents import is_off_policy, relabel_replay_buffer
from preflab.policy.exploration import buffer_state_entropy, buffer_transitions, reset_critic
from preflab.records import Label, Segment
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardEnsemble
from preflab.reward.reed import segment_transitions
from preflab.reward.warmstart import intrinsic_targets, warm_start
from preflab.seeding import derive_seed


class RewardFit:
    """Fits the run's reward model with ``parts.trainer`` and keeps the agent's rewards in step
    with it; it keeps no state (``parts.reward`` owns the model and whether it is fitted)."""

    def __init__(self, config: TrainConfig, parts: RunParts) -> None:
        self.config = config
        self.parts = parts

    def fit(
        self, labels: list[Label], labelled: list[Segment], recent: list[Segment]
    ) -> dict[str, float]:
        """Fit on ``labels`` (``labelled``: the segments they name, in sorted id order;
        ``recent``: the newest pool segments, for the reward's statistics and unlabelled
        data); the fit's metrics."""
        c, p = self.config, self.parts
        reward, agent = p.reward, p.agent
        fitted = reward.fitted
        batch = SegmentBatch.from_segments(labelled)
        lb = LabelBatch.from_labels(labels, batch.index())
        epochs = c.fit.epochs if fitted else c.first_fit_epochs
        items = SegmentBatch.from_segments(recent or labelled)
        unlabelled = items if c.fit.semi_ratio and len(items) >= 2 else batch
        reed = self.reed_pretrain(batch, items) if c.fit.reed.on else None
        rep = p.trainer.fit(batch, lb, p.rng, epochs=epochs, warm=fitted, unlabelled=unlabelled)
        reward.model.fit_reward_stats(items)
        reward.fitted = True
        if c.relabel and is_off_policy(agent):
            relabel_replay_buffer(agent, reward)
        # PEBBLE: forget the value of novelty; RIME keeps it (its reward model was warm-started
        # on that novelty, and the pre-training reward was centred: policy.exploration)
        if not fitted and c.unsup_steps and not c.fit.rime.warm_start_steps:
            reset_critic(agent, seed=c.seed)
            if c.reset_updates and is_off_policy(agent):  # B-Pref's update_after_reset
                agent.train(gradient_steps=c.reset_updates, batch_size=agent.batch_size)
        return {
            "reward_train_loss": float(np.mean(rep.train_loss)),
            "reward_val_loss": float(np.mean(rep.val_loss)),
            "l2": float(np.mean(rep.l2)),
            "reward_fit_steps": rep.steps,
            **({} if rep.pseudo_share is None else {"pseudo_label_share": rep.pseudo_share}),
            **({} if rep.rime_trusted is None else {"rime_trusted": rep.rime_trusted}),
            **({} if rep.rime_flipped is None else {"rime_flipped": rep.rime_flipped}),
            **({} if reed is None else {"reed_loss": reed}),
        }

    def reed_pretrain(self, labelled: SegmentBatch, recent: SegmentBatch) -> float:
        """REED's pre-training before a fit, on the replay buffer's transitions or the recent
        segments' (``fit.reed.data``), the inputs standardised on ``labelled`` as the fit will;
        the mean loss of the last tenth of its steps."""
        c, p = self.config, self.parts
        if c.fit.reed.data == "replay":
            if not is_off_policy(p.agent):
                raise ConfigError(
                    f"fit.reed.data 'replay' needs an off-policy agent (a replay buffer); "
                    f"{c.algo} has none: set --fit.reed.data segments"
                )
            obs, acts, nxt = buffer_transitions(p.agent)
        else:
            obs, acts, nxt = segment_transitions(recent)
        gen = torch.Generator().manual_seed(derive_seed(p.rng))
        losses = p.trainer.reed_pretrain(obs, acts, nxt, labelled, gen)
        return float(np.mean(losses[-max(1, len(losses) // 10) :]))

    def warm_start(self) -> list[float]:
        """RIME's warm start: fit the reward members to the state-entropy reward of the
        pre-training's transitions (the replay buffer); the loss of each step. The loop calls it
        once, after the pre-training and before round 0's queries (their selection sees no
        model until the first fit)."""
        c, p = self.config, self.parts
        obs, acts, dist = buffer_state_entropy(p.agent)
        gen = torch.Generator().manual_seed(derive_seed(p.rng))
        return warm_start(
            p.reward.model,
            p.trainer.optimizer,
            obs,
            acts,
            intrinsic_targets(dist),
            steps=c.fit.rime.warm_start_steps,
            batch_size=c.fit.rime.warm_start_batch,
            gen=gen,
        )

    def end_live_phase(self, env_steps: int, *, relabel: bool = True) -> None:
        """After policy_reward.live_steps env steps the policy trains on the learned reward."""
        p = self.parts
        ended = p.reward.end_live_if_due(env_steps)
        if ended and relabel and is_off_policy(p.agent):  # the buffer holds live ratings
            relabel_replay_buffer(p.agent, p.reward)

    def fix(self, model: RewardEnsemble, items: SegmentBatch) -> None:
        """Continue on the fixed reward ``model``: its weights replace the run's reward model
        (re-standardised on ``items``), the live phase ends and an off-policy replay buffer is
        relabelled."""
        p = self.parts
        p.reward.model.load_state_dict(model.state_dict())
        p.reward.model.fit_reward_stats(items)
        p.reward.fitted = True
        p.reward.end_live()
        relabel_replay_buffer(p.agent, p.reward)

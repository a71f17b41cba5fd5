"""What a run is measured against and what each round's metrics row says (:class:`Measures`):
the learned reward's agreement with the target on the newest segments, the training return,
the label and judgement counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from preflab.config import TrainConfig
from preflab.loop.results import RECENT_EPISODES, RunParts
from preflab.policy.evaluate import reward_agreement
from preflab.records import Segment
from preflab.reward.batch import SegmentBatch
from preflab.sources.teacher import SegmentReward, load_score, segment_rewards


class Measures:
    """Owns the run's target (what it is taught, when that is not the env's reward) and makes
    each round's metrics row from the parts."""

    def __init__(self, config: TrainConfig, parts: RunParts) -> None:
        self.parts = parts
        self.target_fn: SegmentReward | None = (
            load_score(config.eval_target, option="--eval-target")
            if config.eval_target
            else getattr(parts.source, "reward_fn", None)
        )
        """What the run is taught, when it is not the env's reward: scores segments and
        evaluation episodes (metrics, the final table)."""

    def target_return(self, seg: Segment) -> float:
        """What the reward model is measured against: the evaluation target (``--eval-target``,
        else the teacher's ``--teacher.score``) when there is one, else the env's return."""
        fn = self.target_fn
        return float(segment_rewards(fn, seg).sum()) if fn is not None else seg.true_return

    def row(
        self,
        round_: int,
        recent: list[Segment],
        counts: dict[str, int],
        wall: Callable[[], float],
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        """Round ``round_``'s metrics: env steps, ``counts`` (labels, judgements), the training
        return of the last episodes, the learned reward's agreement with the target on
        ``recent`` (a generator seeded by the round), wall time, then ``extra``."""
        p = self.parts
        acc = corr = float("nan")
        if p.reward.fitted and len(recent) >= 2:
            batch = SegmentBatch.from_segments(recent)
            truth = np.array([self.target_return(s) for s in recent])
            acc, corr = reward_agreement(
                p.reward.model, batch, truth, np.random.default_rng(round_)
            )
        ep = [e["r"] for e in p.agent.ep_info_buffer] if p.agent.ep_info_buffer else []
        return {
            "round": round_,
            "env_steps": p.recorder.steps,
            **counts,
            "train_true_return": float(np.mean(ep[-RECENT_EPISODES:])) if ep else float("nan"),
            "reward_accuracy": acc,
            "reward_corr": corr,
            "wall_s": wall(),
        } | extra

"""The loop calls its aggregator through the protocol, once per round."""

from __future__ import annotations

from dataclasses import dataclass, field

from preflab.aggregate import Feedback, IdentityAggregator
from preflab.records import Label
from preflab.runs import train


@dataclass
class Counting:
    """Identity labels, counting the calls and what each call saw."""

    name: str = "counting"
    calls: list[int] = field(default_factory=list)

    def labels(self, feedback: Feedback) -> list[Label]:
        self.calls.append(len(feedback.judgements))
        assert all(j.query_id in feedback.queries for j in feedback.judgements)
        return IdentityAggregator().labels(feedback)


def test_labels_are_computed_once_per_round(tmp_path, pendulum_ppo_config) -> None:
    cfg = pendulum_ppo_config(  # three rounds (the initial one and two more)
        total_steps=1200,
        total_labels=12,
        initial_steps=400,
        steps_per_round=400,
        segment_length=25,
    )
    agg = Counting()
    summary = train(cfg, run_dir=tmp_path, aggregator=agg)
    # one call per round (and at most one more for the final summary row), never two a round
    assert summary.rounds <= len(agg.calls) <= summary.rounds + 1
    assert agg.calls == sorted(agg.calls) and agg.calls[-1] == summary.n_judgements

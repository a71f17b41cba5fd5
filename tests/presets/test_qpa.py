"""The `qpa/walker_walk` preset carries QPA's walker settings (issue #59, item 2).

The expected numbers are read off QPA's own command line for walker_walk (github.com/huxiao09/QPA,
run_QPA.sh): ``num_unsup_steps=9000 num_train_steps=500000 num_interact=20000 max_feedback=100
reward_batch=10 reward_update=2000 segment=50 max_reward_buffer_size=10 data_aug_ratio=20
ensemble_size=1 her_ratio=0.5 agent.params.actor_lr=0.0005``, its config file's defaults
(config/train_QPA.yaml: reward_lr 0.0003) and reward_model.py (train_batch_size 128, snippets
S − 15 … S − 5 steps long, training stops at 98 % accuracy)."""

import json
import math

from preflab.config.file import load_config
from preflab.presets import preset_names, preset_path

QPA_WALKER = {
    "num_unsup_steps": 9000,
    "num_train_steps": 500_000,
    "num_interact": 20_000,
    "max_feedback": 100,
    "reward_batch": 10,
    "segment": 50,
    "max_reward_buffer_size": 10,
    "data_aug_ratio": 20,
    "ensemble_size": 1,
    "her_ratio": 0.5,
    "reward_lr": 0.0003,
    "train_batch_size": 128,
    "actor_lr": 0.0005,
    "stop_accuracy": 0.98,
}


def test_the_qpa_walker_preset_is_shipped_with_qpas_settings() -> None:
    assert "qpa/walker_walk" in preset_names()
    c = load_config(preset_path("qpa/walker_walk"))
    q = QPA_WALKER
    assert c.env_id == "dm_control/walker-walk-v0" and c.algo == "sac"
    assert c.unsup_steps == q["num_unsup_steps"]
    assert c.total_steps == q["num_train_steps"]
    assert c.steps_per_round == q["num_interact"]
    assert c.total_labels == q["max_feedback"]
    assert c.initial_label_frac * c.total_labels == q["reward_batch"]  # one session's worth
    assert c.schedule == "sessions"  # reward_batch labels in every session until spent
    assert c.segment_length == q["segment"]
    assert c.selector == "policy-aligned"
    assert c.aligned_episodes == q["max_reward_buffer_size"]
    assert c.pool_size >= c.aligned_episodes * 1000 // c.segment_length  # the window fits
    assert c.replay.hybrid and c.replay.recent_ratio == q["her_ratio"]
    assert c.replay.recent_episodes == q["max_reward_buffer_size"]
    assert c.replay.until_labels_spent
    assert c.fit.snippets.copies == q["data_aug_ratio"]
    assert c.fit.snippets.shorten == (5, 15)
    assert c.reward.members == q["ensemble_size"]
    assert math.isclose(c.fit.lr, q["reward_lr"])
    assert c.fit.batch_size == q["train_batch_size"]
    assert c.fit.stop_accuracy == q["stop_accuracy"]
    assert json.loads(c.agent_kwargs)["learning_rate"] == q["actor_lr"]

"""The `surf/walker_walk` preset carries SURF's walker settings (issue #59, item 3).

The expected numbers are read off SURF's own command line for walker_walk (github.com/alinlab/SURF,
README, "DeepMind Control Suite (Walker walk)", SURF): ``num_unsup_steps=9000
num_train_steps=500000 num_interact=20000 max_feedback=100 reward_batch=10
inv_label_ratio=100 reward_update=1000 feed_type=1 threshold_u=0.99 mu=4
agent.params.actor_lr=0.0005``, and its config file's defaults (config/train_PEBBLE_semi_dataaug.yaml:
segment 50, reward_lr 0.0003, ensemble_size 3, lambda_u 1, crop_range 5; train_batch_size 128
in reward_model_semi_dataaug.py)."""

import json
import math

from preflab.config.file import load_config
from preflab.presets import preset_names, preset_path

SURF_WALKER = {
    "num_unsup_steps": 9000,
    "num_train_steps": 500_000,
    "num_interact": 20_000,
    "max_feedback": 100,
    "reward_batch": 10,
    "reward_update": 1000,
    "feed_type": 1,  # disagreement
    "threshold_u": 0.99,
    "mu": 4,
    "lambda_u": 1.0,
    "crop_range": 5,
    "segment": 50,
    "reward_lr": 0.0003,
    "ensemble_size": 3,
    "train_batch_size": 128,
    "actor_lr": 0.0005,
}


def test_the_surf_walker_preset_is_shipped() -> None:
    assert "surf/walker_walk" in preset_names()


def test_the_surf_walker_preset_has_surfs_walker_settings() -> None:
    c = load_config(preset_path("surf/walker_walk"))
    s = SURF_WALKER
    assert c.env_id == "dm_control/walker-walk-v0" and c.algo == "sac"
    assert c.unsup_steps == s["num_unsup_steps"]
    assert c.total_steps == s["num_train_steps"]
    assert c.steps_per_round == s["num_interact"]
    assert c.total_labels == s["max_feedback"]
    assert c.initial_label_frac * c.total_labels == s["reward_batch"]  # one session's worth
    assert c.schedule == "sessions"  # reward_batch labels in every session until spent
    assert c.selector == "disagreement"
    assert c.segment_length == s["segment"]
    # reward_update: ceil(1000 × labels / 128) steps on batches of 128 = 1,000 epochs, no stop
    assert c.fit.epochs == c.first_fit_epochs == s["reward_update"]
    assert c.fit.batch_size == s["train_batch_size"]
    assert c.fit.stop_accuracy is None
    assert c.fit.semi_threshold == s["threshold_u"]
    assert c.fit.semi_ratio == s["mu"]
    assert c.fit.semi_weight == s["lambda_u"]
    assert c.fit.crop == s["crop_range"]
    assert math.isclose(c.fit.lr, s["reward_lr"])
    assert c.reward.members == s["ensemble_size"]
    assert json.loads(c.agent_kwargs)["learning_rate"] == s["actor_lr"]

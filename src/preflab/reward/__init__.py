"""Reward model: an ensemble of per-step reward networks fit by Bradley–Terry on preferences."""

from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardConfig, RewardEnsemble
from preflab.reward.protocol import RewardModel, pair_variance, preference_probs
from preflab.reward.robust import RimeConfig
from preflab.reward.trainer import FitConfig, FitReport, RewardTrainer

__all__ = [
    "FitConfig",
    "FitReport",
    "LabelBatch",
    "RewardConfig",
    "RewardEnsemble",
    "RewardModel",
    "RewardTrainer",
    "RimeConfig",
    "SegmentBatch",
    "pair_variance",
    "preference_probs",
]

"""Simulated crowds: users of unknown reliability, optional minority viewpoints, a crowd source."""

from preflab.crowd.objectives import hopper_forward, hopper_height
from preflab.crowd.source import CrowdSource
from preflab.crowd.users import (
    CrowdConfig,
    User,
    answer_pairs,
    discounted_returns,
    error_rates,
    sample_users,
    truth_labels,
)

__all__ = [
    "CrowdConfig",
    "CrowdSource",
    "User",
    "answer_pairs",
    "discounted_returns",
    "error_rates",
    "hopper_forward",
    "hopper_height",
    "sample_users",
    "truth_labels",
]

"""Real-time scalar feedback (Pref-GUIDE): windows, voting, simulated evaluators, reward models."""

from preflab.scalar.evaluators import EvaluatorConfig, Rater, population, rate_stream
from preflab.scalar.models import (
    ScalarModelConfig,
    fit_preferences,
    fit_regression,
    item_scores,
    pooled_labels,
    voting_labels,
)
from preflab.scalar.ratings import stream_values
from preflab.scalar.source import NoQueries, SimulatedRaters, StreamSelector
from preflab.scalar.windows import (
    DEFAULT_DELTA,
    PairLabels,
    binary_majority,
    vote_labels,
    window_labels,
    window_pairs,
)

__all__ = [
    "DEFAULT_DELTA",
    "EvaluatorConfig",
    "NoQueries",
    "PairLabels",
    "Rater",
    "ScalarModelConfig",
    "SimulatedRaters",
    "StreamSelector",
    "binary_majority",
    "fit_preferences",
    "fit_regression",
    "item_scores",
    "pooled_labels",
    "population",
    "rate_stream",
    "stream_values",
    "vote_labels",
    "voting_labels",
    "window_labels",
    "window_pairs",
]

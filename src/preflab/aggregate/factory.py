"""Aggregators by name (configs and the CLI pick them this way)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from preflab.aggregate.adapter import MajorityAggregator, SMLAggregator
from preflab.aggregate.identity import ConfidenceAggregator, IdentityAggregator
from preflab.aggregate.protocol import Aggregator
from preflab.aggregate.scalar import VotingAggregator, WindowAggregator
from preflab.errors import ConfigError

AggregatorName = Literal["identity", "confidence", "majority", "sml", "window", "voting"]
AGGREGATORS: tuple[str, ...] = ("identity", "confidence", "majority", "sml", "window", "voting")

_CLASSES: dict[str, Callable[..., Aggregator]] = {
    "identity": IdentityAggregator,
    "confidence": ConfidenceAggregator,
    "majority": MajorityAggregator,
    "sml": SMLAggregator,
    "window": WindowAggregator,
    "voting": VotingAggregator,
}


def make_aggregator(name: AggregatorName | str, **kw: Any) -> Aggregator:
    """The aggregator called ``name``, built with keyword options ``kw``.

    'identity', 'confidence', 'majority': no options; 'sml': strict, min_overlap; 'window':
    window, delta, annotators; 'voting': window, delta, vote_delta, seed, model, annotators.
    """
    cls = _CLASSES.get(name)
    if cls is None:
        raise ConfigError(f"unknown aggregator {name!r}; expected one of {AGGREGATORS}")
    if "annotators" in kw and kw["annotators"] is not None:
        kw["annotators"] = tuple(kw["annotators"])
    try:
        agg = cls(**kw)
    except TypeError as exc:
        raise ConfigError(
            f"aggregator {name!r} does not take option(s) {sorted(kw)}: {exc}. "
            f"See preflab.aggregate.make_aggregator for each aggregator's options"
        ) from exc
    return agg

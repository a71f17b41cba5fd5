"""One aggregator made of several: every part's labels, in order (people's judgements and
ratings in one fit).

With people in the studio (``--source store``) the loop's feedback holds pairwise and group
judgements *and* real-time ratings of published episodes; ``CombinedAggregator(parts=(
IdentityAggregator(), SampledWindows(...)))`` gives one label per answer followed by the
windowed labels of Pref-GUIDE's Algorithm 1. Each part sees the whole feedback and takes what
it understands (identity reads judgements, windows read ratings).
"""

from __future__ import annotations

from dataclasses import dataclass

from preflab.aggregate.protocol import Aggregator, Feedback
from preflab.errors import ConfigError
from preflab.records import Label


@dataclass(frozen=True, kw_only=True)
class CombinedAggregator:
    """The labels of every aggregator in ``parts``, concatenated in order."""

    parts: tuple[Aggregator, ...]
    """The aggregators whose labels are combined (at least one)."""

    def __post_init__(self) -> None:
        if not self.parts:
            raise ConfigError("CombinedAggregator needs at least one part, got none")

    @property
    def name(self) -> str:
        """The parts' names joined by '+', e.g. 'identity+window'."""
        return "+".join(p.name for p in self.parts)

    def labels(self, feedback: Feedback) -> list[Label]:
        out: list[Label] = []
        for part in self.parts:
            out.extend(part.labels(feedback))
        return out

"""frontier-tuning-walker's selection rule (issue #59): which of PrefLab's additions is "best".

The entry (``benchmarks/plan.toml``, target kind ``selection``) gives no verdict; read once when
all its runs exist, it fixes the configuration that ``frontier-walker-cheetah`` and
``frontier-robust-walker`` run as their ``combo`` arm. Its rule, as registered:

- best = the candidate (pretrain, surf, qpa, rime, rune, combo; not plain) with the highest IQM
  ratio to SAC on the true reward (paired by seed; the point estimate);
- candidates within 0.01 of the highest are tied; a tie goes to the candidate with fewer parts (a
  single addition before ``combo``), then to the order pretrain, surf, qpa, rime, rune;
- best runs in the other entries as ``--arms combo --combo PARTS``: a single addition P as
  ``--combo P`` (the same configuration as arm P; ``rime`` as ``--combo pretrain rime``, since
  RIME's warm start fits the pre-training's reward), ``combo`` with its own parts.

"Within 0.01" is measured from the highest point estimate (not chained from candidate to
candidate), so the tied set is every candidate whose ratio is at least the highest − 0.01.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from preflab.errors import ConfigError

CANDIDATES = ("pretrain", "surf", "qpa", "rime", "rune", "combo")
"""The candidates, in the rule's order for ties (``combo`` last: it has the most parts)."""
TIE = 0.01
"""Candidates whose ratio is within this of the highest are tied."""


@dataclass(frozen=True)
class Pick:
    """The outcome of the rule."""

    arm: str
    """The winning candidate."""
    parts: tuple[str, ...]
    """What ``--combo`` takes in the entries that run it."""
    best_ratio: float
    """The highest point estimate among the candidates."""
    tied: tuple[str, ...]
    """The candidates within :data:`TIE` of the highest, in the rule's order (the winner first)."""

    @property
    def flags(self) -> str:
        """The arm as the other entries' commands give it."""
        return "--arms combo --combo " + " ".join(self.parts)


def pick(
    ratios: Mapping[str, float],
    parts: Mapping[str, Sequence[str]],
) -> Pick:
    """Apply the rule to each candidate's point estimate ``ratios`` (every candidate of
    :data:`CANDIDATES` must be there, a finite number); ``parts``: each candidate's parts (for
    ``combo`` its ``--combo``). Raises :class:`ConfigError` naming what is missing."""
    missing = [c for c in CANDIDATES if c not in ratios or not math.isfinite(ratios[c])]
    if missing:
        raise ConfigError(
            f"the selection needs a finite IQM ratio to SAC on the true reward for every "
            f"candidate; missing or not finite: {', '.join(missing)}"
        )
    top = max(ratios[c] for c in CANDIDATES)
    tied = [c for c in CANDIDATES if ratios[c] >= top - TIE - 1e-12]

    def size(c: str) -> int:  # a single addition counts 1, combo its number of parts
        return len(parts[c]) if c == "combo" else 1

    tied.sort(key=lambda c: (size(c), CANDIDATES.index(c)))
    arm = tied[0]
    return Pick(arm=arm, parts=tuple(parts[arm]), best_ratio=top, tied=tuple(tied))


def selection_text(
    entry_id: str, ratios: Mapping[str, float], parts: Mapping[str, Sequence[str]]
) -> str:
    """The report's paragraph: the pick and how the rule reached it, or what it still needs."""
    try:
        p = pick(ratios, parts)
    except ConfigError as e:
        return f"**Selection ({entry_id}): none yet.** {e}."
    listed = ", ".join(f"{c} {ratios[c]:.4g}" for c in sorted(CANDIDATES, key=lambda c: -ratios[c]))
    why = (
        f"the highest ratio, {p.best_ratio:.4g}"
        if len(p.tied) == 1
        else f"tied within {TIE:g} of the highest ({p.best_ratio:.4g}) with "
        f"{', '.join(c for c in p.tied if c != p.arm)}; fewer parts, then the rule's order"
    )
    return (
        f"**Selection ({entry_id}): best = {p.arm}** ({why}). The entries that run the best "
        f"configuration give it as `{p.flags}`. IQM ratios to SAC on the true reward (point "
        f"estimates, the rule's input): {listed}."
    )

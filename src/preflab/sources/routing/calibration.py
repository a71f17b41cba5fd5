"""The AI judge's accuracy against people, estimated live, and the confidence threshold it sets.

Every calibration query is answered by both the AI judge and people (module docstring of
:mod:`preflab.sources.routing.router` says which queries calibrate). Each gives one record
(c, ok): the AI's confidence c and whether its side agreed with people's (people's answer is
taken as the truth; a tie or "can't tell" from people gives no record, an AI tie or abstention
counts as a disagreement).

**Accuracy** is k / n with a Wilson score interval at ``level`` (scipy's
``binomtest(k, n).proportion_ci(level, "wilson")``; no continuity correction). For 8 agreements
in 10 at 95 % it is [0.490, 0.943].

**The threshold rule** for a target label error e* (the user's ``--route.target-error``): among
the confidences t that calibration records have, the AI's threshold is the smallest t such that
the records with confidence ≥ t number at least ``min_records`` and the upper end of the Wilson
interval of their error rate (disagreements / records) at ``level`` is ≤ e*. The AI's answer to
a query is used when its confidence is ≥ that threshold. When no t qualifies (too few records,
or the AI too often wrong even when sure) the threshold is None: the AI answers nothing on its
own and its queries go to people.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from preflab.errors import DataError


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion k / n at ``level`` ((0, 1) for n = 0)."""
    if n < 0 or not 0 <= k <= max(n, 0):
        raise DataError(f"a proportion needs 0 ≤ k ≤ n, got k={k}, n={n}")
    if not 0.0 < level < 1.0:
        raise DataError(f"the interval's level must be in (0, 1), got {level}")
    if n == 0:
        return 0.0, 1.0
    from scipy.stats import binomtest  # scipy.stats is slow to import: only when measured

    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class Record:
    """One calibration query: the AI's confidence and whether it agreed with people."""

    confidence: float
    """The AI's confidence in its answer (0.5 to 1)."""
    agreed: bool
    """True when the AI's side is people's side."""


class Calibration:
    """The calibration records so far, the AI's accuracy and its threshold (module docstring)."""

    def __init__(self, *, level: float = 0.95, min_records: int = 10) -> None:
        if not 0.0 < level < 1.0:
            raise DataError(f"the calibration level must be in (0, 1), got {level}")
        if min_records < 1:
            raise DataError(f"min_records must be ≥ 1, got {min_records}")
        self.level = level
        self.min_records = min_records
        self.records: list[Record] = []

    def add(self, confidence: float, agreed: bool) -> None:
        """One more calibration query."""
        self.records.append(Record(float(confidence), bool(agreed)))

    @property
    def n(self) -> int:
        """Calibration records."""
        return len(self.records)

    @property
    def agreed(self) -> int:
        """Of those, the AI agreed with people."""
        return sum(r.agreed for r in self.records)

    def accuracy(self) -> tuple[float | None, float, float]:
        """(k / n or None, Wilson low, Wilson high) of the AI's agreement with people."""
        lo, hi = wilson_interval(self.agreed, self.n, self.level)
        return (self.agreed / self.n if self.n else None), lo, hi

    def threshold(self, target_error: float) -> float | None:
        """The smallest confidence whose records (≥ it) meet ``target_error`` with the rule of
        the module docstring; None when none does."""
        if not 0.0 < target_error < 1.0:
            raise DataError(f"the target label error must be in (0, 1), got {target_error}")
        for t in sorted({r.confidence for r in self.records}):
            above = [r for r in self.records if r.confidence >= t]
            if len(above) < self.min_records:
                return None  # higher thresholds keep fewer records still
            wrong = sum(not r.agreed for r in above)
            if wilson_interval(wrong, len(above), self.level)[1] <= target_error:
                return t
        return None

    def report(self, target_error: float) -> dict[str, Any]:
        """Accuracy with its interval, the level, records and the threshold, for summary.json."""
        acc, lo, hi = self.accuracy()
        return {
            "records": self.n,
            "agreed": self.agreed,
            "accuracy": acc,
            "interval": [lo, hi],
            "level": self.level,
            "threshold": self.threshold(target_error),
            "target_error": target_error,
        }

    def state(self) -> list[list[Any]]:
        """The records as [[confidence, agreed], ...] (JSON)."""
        return [[r.confidence, r.agreed] for r in self.records]

    def load_state(self, rows: Sequence[Sequence[Any]]) -> None:
        """Back to :meth:`state`."""
        try:
            self.records = [Record(float(c), bool(a)) for c, a in rows]
        except (TypeError, ValueError) as exc:
            raise DataError(f"routing calibration state is malformed: {exc}") from exc

"""Stored real-time ratings to streams: one evaluator, one stream, time order checked."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from preflab.errors import DataError
from preflab.records import Rating


def stream_values(ratings: Sequence[Rating]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, times, values) of one evaluator's ratings of one stream, in the stored order.

    Raises DataError when the ratings mix evaluators or streams, when timestamps are not
    strictly increasing (unsorted or duplicated: a duplicate would give two labels for one
    moment), or when steps go backwards. Nothing is reordered silently: sort by ``t`` first
    if the order was lost in transit.
    """
    if not ratings:
        raise DataError("no ratings given; a stream needs at least one rating")
    who = {(r.annotator_id, r.stream_id) for r in ratings}
    if len(who) > 1:
        raise DataError(
            f"ratings mix {len(who)} (annotator, stream) combinations, e.g. {sorted(who)[:2]}; "
            "call stream_values once per evaluator and stream"
        )
    steps = np.array([r.step for r in ratings], dtype=np.int64)
    times = np.array([r.t for r in ratings], dtype=np.float64)
    values = np.array([r.value for r in ratings], dtype=np.float64)
    if not np.all(np.isfinite(times)):
        raise DataError("rating timestamps contain NaN or infinite values")
    dt = np.diff(times)
    if np.any(dt == 0):
        k = int(np.flatnonzero(dt == 0)[0])
        raise DataError(
            f"ratings {k} and {k + 1} share timestamp t={times[k]}; drop or merge duplicates"
        )
    if np.any(dt < 0):
        k = int(np.flatnonzero(dt < 0)[0])
        raise DataError(
            f"rating timestamps are not sorted: t[{k}]={times[k]} > t[{k + 1}]={times[k + 1]}; "
            "sort by t first"
        )
    if np.any(np.diff(steps) < 0):
        k = int(np.flatnonzero(np.diff(steps) < 0)[0])
        raise DataError(f"rating steps go backwards at index {k} ({steps[k]} → {steps[k + 1]})")
    return steps, times, values

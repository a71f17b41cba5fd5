"""Two objectives of MO-Hopper (mo-gymnasium ``mo-hopper-v5``), built from Hopper observations.

mo-hopper-v5's reward vector is (x-velocity + 1, 10·(z − z₀) + 1, −‖a‖² + 1) with z₀ = 1.25;
Hopper-v5's observation (positions without x, then velocities) holds z at index 0 and the
x-velocity at index 5. Segment observations are the states *before* each action, so these
per-step rewards lag mo-hopper's by one step; over a segment the sums agree closely.
"""

from __future__ import annotations

import numpy as np

from preflab.errors import DataError
from preflab.records import Segment

HOPPER_INIT_Z = 1.25


def _check(segment: Segment) -> np.ndarray:
    if segment.obs.shape[1] < 6:
        raise DataError(
            f"segment {segment.id} has obs dim {segment.obs.shape[1]}; Hopper objectives need "
            "Hopper-v5 observations (11-d, x position excluded)"
        )
    return segment.obs


def hopper_forward(segment: Segment) -> np.ndarray:
    """Forward objective per step: x-velocity + 1 (survive bonus), shape (T,)."""
    return _check(segment)[:, 5].astype(np.float64) + 1.0


def hopper_height(segment: Segment) -> np.ndarray:
    """Jump-height objective per step: 10·(z − 1.25) + 1 (survive bonus), shape (T,)."""
    return 10.0 * (_check(segment)[:, 0].astype(np.float64) - HOPPER_INIT_Z) + 1.0

"""Failpoints: kill the process at a named write point, for crash tests.

Set ``PREFLAB_FAILPOINT=NAME`` (or ``NAME:N`` for the N-th time the point is reached, counting
from 1) and the process sends itself SIGKILL there. Unset, a failpoint costs one dict lookup.
Points: ``queries_stored``, ``judgements_stored``, ``checkpoint_partial``, ``round_end``,
``pretrained`` (round 0's checkpoint after PEBBLE's pre-training is written), ``warm_started``
(round 0's checkpoint after RIME's warm start is written).
"""

from __future__ import annotations

import os
import signal

_counts: dict[str, int] = {}


def failpoint(name: str) -> None:
    """SIGKILL this process if ``PREFLAB_FAILPOINT`` names this point (and its count is due)."""
    spec = os.environ.get("PREFLAB_FAILPOINT")
    if not spec:
        return
    target, _, nth = spec.partition(":")
    if target != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)

"""Fixtures the bench tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from preflab.records import Annotator, Segment
from preflab.store import FeedbackStore


@pytest.fixture
def session_store(tmp_path: Path) -> Iterator[FeedbackStore]:
    """A studio session's store as the studio_session bench reads it: one person ('pia', with
    a token) and eight Hopper segments s0..s7 whose true return is 4k (4 steps of reward k)."""
    s = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    s.annotators.add(Annotator(id="pia", source="human", name="pia"), token="tok-" + "p" * 28)
    rng = np.random.default_rng(0)
    s.segments.add(
        [
            Segment(
                id=f"s{k}",
                obs=rng.normal(size=(4, 11)).astype(np.float32),
                acts=rng.normal(size=(4, 3)).astype(np.float32),
                true_rewards=np.full(4, float(k), np.float32),  # return 4k
                env_id="Hopper-v5",
            )
            for k in range(8)
        ]
    )
    yield s
    s.close()

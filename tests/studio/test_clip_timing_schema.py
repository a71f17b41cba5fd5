"""The studio's answer about a clip's timing takes every source the timing module can give: a
DeepMind Control pair (timing from its control timestep) once failed validation with HTTP 500."""

from __future__ import annotations

from typing import get_args

import pytest

from preflab.media.timing import TimingSource, clip_timing
from preflab.studio.schemas import ClipTiming


@pytest.mark.parametrize("source", get_args(TimingSource))
def test_every_timing_source_is_a_valid_answer(source: str) -> None:
    t = ClipTiming(
        step_seconds=0.025,
        steps_per_s=40.0,
        fps=40.0,
        playback_rate=1.0,
        still_frames=0,
        source=source,  # type: ignore[arg-type]
    )
    assert t.source == source


def test_a_deepmind_control_clip_timing_goes_through_the_schema() -> None:
    t = clip_timing("dm_control/walker-walk-v0")
    assert ClipTiming(**t.as_dict()).source == "control_timestep"

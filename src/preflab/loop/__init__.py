"""The preference-learning loop: rounds and checkpoints (:mod:`preflab.loop.rounds`), over the
parts :func:`preflab.assemble.assemble` builds (:mod:`preflab.loop.results`), paced by a clock
(:mod:`preflab.loop.pacing`)."""

from preflab.loop.pacing import Clock, PeopleClock, StepClock, make_clock
from preflab.loop.results import (
    Hooks,
    LoopState,
    ProgressFn,
    RunParts,
    RunResult,
    derived_id,
    label_schedule,
    last_finite,
    selector_state,
)
from preflab.loop.rounds import PreferenceLoop

__all__ = [
    "Clock",
    "Hooks",
    "LoopState",
    "PeopleClock",
    "PreferenceLoop",
    "ProgressFn",
    "RunParts",
    "RunResult",
    "StepClock",
    "derived_id",
    "label_schedule",
    "last_finite",
    "make_clock",
    "selector_state",
]

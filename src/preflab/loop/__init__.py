"""The preference-learning loop: rounds and checkpoints (:mod:`preflab.loop.rounds`), over the
parts :func:`preflab.assemble.assemble` builds (:mod:`preflab.loop.results`), paced by a clock
(:mod:`preflab.loop.pacing`). The loop's own jobs, each a small part it holds: asking and
collecting (:mod:`preflab.loop.asking`), rollouts into the segment pool
(:mod:`preflab.loop.rollouts`), fitting the reward (:mod:`preflab.loop.fitting`), each round's
metrics (:mod:`preflab.loop.measuring`), what a checkpoint holds (:mod:`preflab.loop.snapshot`),
the warnings (:mod:`preflab.loop.diagnosis`) and the trackers' clips (:mod:`preflab.loop.clips`)."""

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

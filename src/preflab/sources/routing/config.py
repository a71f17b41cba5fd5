"""The routing source's options (``--source route``, set with ``--route.*``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from preflab.errors import ConfigError
from preflab.sources.simulated_judge import SimulatedJudgeConfig

AI_JUDGES = ("simulated", "vlm", "llm")
"""Who answers as the AI: the simulated judge, the vision-language judge (``--vlm.*``), or the
same judge over the key steps' states in words (``--vlm.*`` with ``view = states``: a text-only
model such as ``preflab llm serve-local``)."""
PEOPLE = ("oracle", "store", "crowd")
"""Who answers as people: the synthetic teacher standing in for them (``--teacher.*``), people
in the studio (``--source store``'s way: the run is paced by their answers), or a simulated
crowd (``--crowd.*``)."""


@dataclass(frozen=True, kw_only=True)
class RoutingConfig:
    """One run, several answerers: each query goes to the cheapest one likely to be right
    (docs/guide/routing.md)."""

    ai: Literal["simulated", "vlm", "llm"] = "simulated"
    """The AI judge: 'simulated' (its error model in --route.judge.*), 'vlm' (rendered frames,
    --vlm.*) or 'llm' (the same judge shown the key steps' states in words, --vlm.*)."""
    people: Literal["oracle", "store", "crowd"] = "oracle"
    """People: 'oracle' (the synthetic teacher, --teacher.*, standing in for them), 'store'
    (people in the studio; the run is paced by their answers) or 'crowd' (--crowd.*)."""
    target_error: float = 0.1
    """The label error you accept from the AI: its threshold is the lowest confidence at which
    the upper end of the Wilson interval of its error against people is at most this."""
    calibration_share: float = 0.1
    """Share of the queries the AI answers that people answer too, to measure the AI."""
    level: float = 0.95
    """Level of the Wilson interval of the AI's accuracy (and of the threshold rule)."""
    min_calibration: int = 10
    """Calibration answers needed before the AI may answer on its own."""
    use_model: bool = True
    """Let the reward model answer the pairs its ensemble is sure about."""
    model_threshold: float = 0.95
    """τ: the model answers a pair when every member is at least this sure and all pick the
    same side (SURF's 0.95)."""
    budget_model: int | None = None
    """Most answers the model may give (None: no limit)."""
    budget_ai: int | None = None
    """Most queries the AI may be asked (None: no limit)."""
    budget_people: int | None = None
    """Most queries people may be asked, calibration included (None: no limit)."""
    people_spent: Literal["skip", "ai"] = "skip"
    """A pair the model and the AI are both unsure about, once people's budget is spent: 'skip'
    leaves it unanswered (counted as unrouted: no label rather than one its answerer is unsure
    of), 'ai' takes the AI's answer regardless of its threshold and, when the AI cannot answer
    either, the model's guess (PrefLab's only behaviour before 2026-12-06)."""
    judge: SimulatedJudgeConfig = field(default_factory=SimulatedJudgeConfig)
    """The simulated AI judge's error model when ai = 'simulated'."""

    def __post_init__(self) -> None:
        if self.ai not in AI_JUDGES:
            raise ConfigError(f"route.ai must be one of {AI_JUDGES}, got {self.ai!r}")
        if self.people_spent not in ("skip", "ai"):
            raise ConfigError(
                f"route.people_spent must be 'skip' or 'ai', got {self.people_spent!r}"
            )
        if self.people not in PEOPLE:
            raise ConfigError(f"route.people must be one of {PEOPLE}, got {self.people!r}")
        if not (math.isfinite(self.target_error) and 0.0 < self.target_error < 0.5):
            raise ConfigError(
                f"route.target_error must be in (0, 0.5) (0.1: one AI label in ten may be "
                f"wrong), got {self.target_error}"
            )
        if not 0.0 <= self.calibration_share <= 1.0:
            raise ConfigError(
                f"route.calibration_share must be in [0, 1], got {self.calibration_share}"
            )
        if not 0.0 < self.level < 1.0:
            raise ConfigError(f"route.level must be in (0, 1) (e.g. 0.95), got {self.level}")
        if self.min_calibration < 1:
            raise ConfigError(f"route.min_calibration must be ≥ 1, got {self.min_calibration}")
        if not 0.5 <= self.model_threshold <= 1.0:
            raise ConfigError(
                f"route.model_threshold must be in [0.5, 1] (SURF uses 0.95), got "
                f"{self.model_threshold}"
            )
        for name in ("budget_model", "budget_ai", "budget_people"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ConfigError(
                    f"route.{name} must be ≥ 0 answers (leave it unset for no limit), got {v}"
                )

"""Settings of a study with real people (issue #61): who may join, how answers are checked,
assigned and paid. Stored with the study in the run's store (table ``studies``) and set by
``preflab studio study``."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from preflab.errors import ConfigError

DEFAULT_CONSENT = """\
# Consent

You are invited to take part in a study on how people judge the behaviour of learning agents.
You will watch pairs of short clips and say which one better does what the task asks.

- Taking part is voluntary; you may stop at any time.
- We store your answers, how long they took, and the ids your recruiting platform passes to
  this page. We store no name and no e-mail address.
- The answers are used for research and may be published in anonymised form.
"""

DEFAULT_INSTRUCTIONS = """\
# Instructions

Each question shows two clips of the same agent. Watch both, then choose the one that better
does what the task says (keys: **←** left, **→** right, **↓** equal).
Some questions are checks whose answer is known. First, a few practice pairs: they do not count.
"""

PID_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
"""What a platform id may look like (Prolific's are 24 hex digits)."""


@dataclass(frozen=True, kw_only=True)
class StudyConfig:
    """How a study enrols, checks, assigns and pays its participants."""

    title: str = "PrefLab study"
    """Shown at the top of every study page."""
    cap: int = 100
    """Most people who may join; the link says "this study is full" after that."""
    overlap: int = 3
    """How many people answer each pair (k); the crowd's label is SML when k ≥ 3, else majority."""
    gold_rate: float = 0.1
    """Share of a person's questions that are attention checks (pairs with a known answer)."""
    gold_fail_share: float = 0.34
    """A person who fails more than this share of their attention checks is flagged."""
    min_gold: int = 3
    """Attention checks a person must have answered before the failure share can flag them."""
    min_answers: int = 10
    """Answers a person must have given before the speed and side-bias rules can flag them."""
    side_z: float = 3.29
    """A person who picks one side with a z-score above this (|left − n/2| / (√n / 2); 3.29 is
    two-sided p = 0.001 under chance) is flagged for side bias."""
    min_agreement: float = 0.5
    """A person whose decisive answers match the others' majority on the same pairs less often
    than this (after ``min_answers`` such answers) is flagged ('crowd'; 0.5 is chance)."""
    clip_s: float = 0.0
    """Seconds the clips of a pair take to play; a person whose median response time is
    shorter is flagged as faster than the clips play (0: measured from the segments' length at
    the studio's frame rate)."""
    quota_answers: int = 40
    """Answers (attention checks included) after which a person is done (0: no answer quota)."""
    quota_minutes: float = 0.0
    """Minutes on task after which a person is done (0: no time quota)."""
    completion_code: str = ""
    """The code shown on the completion page (Prolific: the study's completion code)."""
    redirect_url: str = ""
    """Where the completion page sends people (Prolific:
    https://app.prolific.com/submissions/complete?cc=CODE); empty: no redirect."""
    consent_md: str = DEFAULT_CONSENT
    """The consent text (Markdown), shown before anything else."""
    instructions_md: str = DEFAULT_INSTRUCTIONS
    """The instructions (Markdown), shown after consent with an example pair."""
    practice_pairs: int = 3
    """Practice pairs with feedback before answers count (0: none)."""
    reserve_s: float = 120.0
    """Seconds a pair served to a person stays reserved for them when the overlap is counted
    (so that k people answering at once do not all get the same last pair)."""

    def __post_init__(self) -> None:
        bad = []
        if self.cap < 1:
            bad.append(f"cap must be ≥ 1, got {self.cap}")
        if not 1 <= self.overlap <= 50:
            bad.append(f"overlap must be in [1, 50], got {self.overlap}")
        if not 0.0 <= self.gold_rate <= 0.5:
            bad.append(f"gold_rate must be in [0, 0.5], got {self.gold_rate}")
        if not 0.0 <= self.min_agreement <= 1.0:
            bad.append(f"min_agreement must be in [0, 1], got {self.min_agreement}")
        if not 0.0 <= self.gold_fail_share <= 1.0:
            bad.append(f"gold_fail_share must be in [0, 1], got {self.gold_fail_share}")
        if self.min_gold < 1 or self.min_answers < 1:
            bad.append("min_gold and min_answers must be ≥ 1")
        if self.side_z <= 0:
            bad.append(f"side_z must be > 0, got {self.side_z}")
        if self.clip_s < 0 or self.quota_answers < 0 or self.quota_minutes < 0:
            bad.append("clip_s, quota_answers and quota_minutes must be ≥ 0")
        if self.practice_pairs < 0 or self.practice_pairs > 10:
            bad.append(f"practice_pairs must be in [0, 10], got {self.practice_pairs}")
        if len(self.completion_code) > 64 or not self.completion_code.isprintable():
            bad.append("completion_code must be at most 64 printable characters")
        if self.redirect_url:
            parts = urlsplit(self.redirect_url)
            if parts.scheme not in ("https", "http") or not parts.netloc:
                bad.append(
                    f"redirect_url must be an http(s) URL, got {self.redirect_url!r} "
                    "(e.g. https://app.prolific.com/submissions/complete?cc=CODE)"
                )
        if len(self.consent_md) > 20_000 or len(self.instructions_md) > 20_000:
            bad.append("consent and instructions must be at most 20000 characters each")
        if bad:
            raise ConfigError("; ".join(bad))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StudyConfig:
        """The config stored with a study (fields this PrefLab does not know are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

"""Settings of a study with real people (issue #61): who may join, how answers are checked,
assigned and paid. Stored with the study in the run's store (table ``studies``) and set by
``preflab studio study``."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
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
        bad = _type_problems(self)
        if not bad:  # the value checks below need numbers and text
            bad = [
                f"{name} must be {expected}, got {getattr(self, name)!r}"
                for name, ok, expected in _LIMITS
                if not ok(getattr(self, name))
            ]
            bad += self._text_problems()
        if bad:
            raise ConfigError("; ".join(bad))

    def _text_problems(self) -> list[str]:
        bad = []
        code = self.completion_code
        if len(code) > 64 or not code.isprintable() or code != code.strip():
            bad.append(
                f"completion_code must be at most 64 printable characters without spaces at "
                f"either end, got {code!r} (copy the code as the platform shows it)"
            )
        if self.redirect_url:
            parts = urlsplit(self.redirect_url)
            if parts.scheme not in ("https", "http") or not parts.netloc:
                bad.append(
                    f"redirect_url must be an http(s) URL, got {self.redirect_url!r} "
                    "(e.g. https://app.prolific.com/submissions/complete?cc=CODE)"
                )
        for name, what in _TEXTS.items():
            text = getattr(self, name)
            if not text.strip():
                bad.append(f"{name} is empty or only whitespace; a study needs {what} (Markdown)")
            elif len(text) > 20_000:
                bad.append(f"{name} must be at most 20000 characters, got {len(text)}")
        return bad

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StudyConfig:
        """The config stored with a study (fields this PrefLab does not know are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "int": ((int,), "a whole number"),
    "float": ((int, float), "a finite number"),
    "str": ((str,), "text"),
}


def _type_problems(config: StudyConfig) -> list[str]:
    """Fields of the wrong kind (a stored config edited by hand) or not finite (NaN or
    infinity, which no rule can compare and no JSON column stores)."""
    bad = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        kinds, expected = _KINDS[str(f.type)]
        wrong = isinstance(value, bool) or not isinstance(value, kinds)
        if wrong or (isinstance(value, float) and not math.isfinite(value)):
            bad.append(f"{f.name} must be {expected}, got {value!r}")
    return bad


_LIMITS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("cap", lambda v: v >= 1, "≥ 1 (the most people who may join)"),
    ("overlap", lambda v: 1 <= v <= 50, "in [1, 50] (people who answer each pair)"),
    ("gold_rate", lambda v: 0 <= v <= 0.5, "in [0, 0.5] (share of attention checks)"),
    ("gold_fail_share", lambda v: 0 <= v <= 1, "in [0, 1] (share of failed checks)"),
    ("min_gold", lambda v: v >= 1, "≥ 1 (attention checks before flagging)"),
    ("min_answers", lambda v: v >= 1, "≥ 1 (answers before flagging)"),
    ("side_z", lambda v: v > 0, "> 0 (a z-score; 3.29 is p = 0.001)"),
    ("min_agreement", lambda v: 0 <= v <= 1, "in [0, 1] (share of answers; 0.5 is chance)"),
    ("clip_s", lambda v: v >= 0, "≥ 0 seconds (0: measured from the segments)"),
    ("quota_answers", lambda v: v >= 0, "≥ 0 (0: no answer quota)"),
    ("quota_minutes", lambda v: v >= 0, "≥ 0 minutes (0: no time quota)"),
    ("practice_pairs", lambda v: 0 <= v <= 10, "in [0, 10] (0: no practice)"),
    ("reserve_s", lambda v: v >= 0, "≥ 0 seconds (how long a served pair stays reserved)"),
)
"""Each number field, the test its value must pass, and what is expected."""

_TEXTS = {
    "consent_md": "a consent text, shown before anything else: give the text people agree to",
    "instructions_md": "instructions, shown after consent: say how to choose between clips",
}
"""The texts a study cannot run without, and what each must say."""

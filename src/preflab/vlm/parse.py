"""Read the vision-language judge's verdict: clip 1, clip 2, equal, or no answer.

The templates ask for a final line ``Answer: 1`` (clip 1 achieves the goal better), ``Answer:
2`` (clip 2) or ``Answer: 0`` (no difference, or unsure). Rules, in order:

1. the last explicit verdict ("Answer: 2", "**Answer:** Clip 1", "final answer - 0", "the
   answer is clip 2", "Answer: equal");
2. otherwise an answer that is only the verdict ("2", "Clip 1.", "equal");

a verdict's value is followed by punctuation, the end, or a reason
(:data:`preflab.llm.parse.ENDS`: "Answer: 1 or 2" is none); anything else (empty, a number
buried in prose, garbage) is no answer: a guess would be an
invented label. p = P(clip 1 ≻ clip 2): 1.0, 0.0, 0.5 (equal / can't tell) or None.
"""

from __future__ import annotations

import re
from typing import Literal

from preflab.llm.parse import ENDS, without_markup

Verdict = Literal["first", "second", "equal"]

_WORD = r"(?:clip|image|video|behaviou?r) ?"
_VALUE = rf"(?:{_WORD})?([012]|first|second|equal|same|tie|neither|none|unsure|no difference)\b"
# on text whose whitespace is collapsed; no nested unbounded repetition (linear time)
_VERDICT = re.compile(
    rf"(?:final )?answer ?(?:is|would be|:|-|=)? ?:? ?\(?{_VALUE}{ENDS}", re.IGNORECASE
)
_ALONE = re.compile(rf"^\(?{_VALUE}\)?[.!]?$", re.IGNORECASE)
_MEANING: dict[str, Verdict] = {"1": "first", "first": "first", "2": "second", "second": "second"}


def parse_verdict(text: str | None) -> Verdict | None:
    """'first', 'second', 'equal', or None when the answer gives no readable verdict."""
    flat = " ".join(without_markup(text).split())
    if not flat:
        return None
    found = _VERDICT.findall(flat)
    value = found[-1] if found else None
    if value is None:
        m = _ALONE.match(flat)
        value = m.group(1) if m else None
    if value is None:
        return None
    return _MEANING.get(value.lower(), "equal")


def verdict_to_p(verdict: Verdict | None) -> float | None:
    """P(clip 1 ≻ clip 2): first 1.0, second 0.0, equal 0.5, no verdict None."""
    if verdict is None:
        return None
    return {"first": 1.0, "second": 0.0, "equal": 0.5}[verdict]

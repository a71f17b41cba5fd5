"""Parse a model's answer into 'yes', 'no' or None (unparseable; never turned into a label).

Rules, in order:
1. the last explicit verdict ("the answer is yes", "Answer: **No**", "final answer - yes");
2. otherwise a leading yes/no ("Yes, the pole ...", "**No.**");
3. otherwise the last line if it is just yes/no;
anything else (empty text, a yes or no buried in prose without a verdict, garbage) is
unparseable: a guess would be a made-up label.
"""

from __future__ import annotations

import re
from typing import Literal

Answer = Literal["yes", "no"]

_MARKUP = re.compile(r"[*_`#>\"'“”‘’]")
_VERDICT = re.compile(
    r"(?:final\s+)?answer\s*(?:is|would\s+be|:|-|=)?\s*:?\s*\(?\b(yes|no)\b", re.IGNORECASE
)
_LEADING = re.compile(r"^\s*(?:a\s*:\s*)?\(?\b(yes|no)\b", re.IGNORECASE)


def parse_answer(text: str | None) -> Answer | None:
    """'yes', 'no', or None when the answer cannot be read reliably."""
    if text is None:
        return None
    clean = _MARKUP.sub("", str(text)).strip()
    if not clean:
        return None
    verdicts = _VERDICT.findall(clean)
    if verdicts:
        return verdicts[-1].lower()  # type: ignore[return-value]
    m = _LEADING.match(clean)
    if m:
        return m.group(1).lower()  # type: ignore[return-value]
    last = clean.splitlines()[-1].strip().rstrip(".!").strip().lower()
    if last in ("yes", "no"):
        return last  # type: ignore[return-value]
    return None


def answer_to_p(answer: Answer | None) -> float | None:
    """P(first state ≻ second state) from a parsed answer to "is the transition from State[0]
    to State[1] good?": yes → the second is better → 0.0; no → 1.0; unparseable → None."""
    if answer is None:
        return None
    return 0.0 if answer == "yes" else 1.0

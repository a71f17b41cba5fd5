"""Parse a model's answer into 'yes', 'no' or None (unparseable; never turned into a label).

Rules, in order:
1. the last explicit verdict ("the answer is yes", "Answer: **No**", "final answer - yes");
2. otherwise a leading yes/no ("Yes, the pole ...", "**No.**");

a verdict's yes or no is followed by punctuation, the end, or a reason (:data:`ENDS`), so
"No doubt, it is good" or "yes or no?" is not read as one;
3. otherwise the last line if it is just yes/no;
anything else (empty text, a yes or no buried in prose without a verdict, garbage) is
unparseable: a guess would be a made-up label.
"""

from __future__ import annotations

import re
from typing import Literal, cast

Answer = Literal["yes", "no"]

_MARKUP = re.compile(r"[*_`#>\"'“”‘’]")
# Applied to text whose whitespace runs are collapsed to one space, and with no unbounded
# repetition, so matching is linear in the length of the answer (a reply with a million
# spaces must not take seconds).
ENDS = r"(?= ?(?:[.,!?:;()\]]|-|–|—|$)| (?:because|since|as|so)\b)"
"""What may follow a verdict's value: punctuation, the end, or a reason ("yes, because",
"Answer: no."). Not more words: "No doubt, it is good", "no longer", "yes or no?" and
"Answer: 1 or 2" are no verdict."""
_VERDICT = re.compile(
    rf"(?:final )?answer ?(?:is|would be|:|-|=)? ?:? ?\(?\b(yes|no)\b{ENDS}", re.IGNORECASE
)
_LEADING = re.compile(rf"^(?:a ?: ?)?\(?\b(yes|no)\b{ENDS}", re.IGNORECASE)
MAX_PARSE_CHARS = 100_000
"""Answers longer than this are judged on their first and last half of it."""


def without_markup(text: str | None) -> str:
    """A model's answer as its verdict is read from: markdown and quote marks removed, and an
    answer longer than :data:`MAX_PARSE_CHARS` cut to its first and last half of it ('' for
    None). Both judges read their answers from this."""
    if text is None:
        return ""
    raw = str(text)
    if len(raw) > MAX_PARSE_CHARS:
        half = MAX_PARSE_CHARS // 2
        raw = raw[:half] + "\n" + raw[-half:]
    return _MARKUP.sub("", raw).strip()


def parse_answer(text: str | None) -> Answer | None:
    """'yes', 'no', or None when the answer cannot be read reliably."""
    clean = without_markup(text)
    if not clean:
        return None
    flat = " ".join(clean.split())
    verdicts = _VERDICT.findall(flat)
    if verdicts:
        return cast(Answer, verdicts[-1].lower())
    m = _LEADING.match(flat)
    if m:
        return cast(Answer, m.group(1).lower())
    last = clean.rsplit("\n", 1)[-1].strip().rstrip(".!").strip().lower()
    if last in ("yes", "no"):
        return cast(Answer, last)
    return None


def answer_to_p(answer: Answer | None) -> float | None:
    """P(first state ≻ second state) from a parsed answer to "is the transition from State[0]
    to State[1] good?": yes → the second is better → 0.0; no → 1.0; unparseable → None."""
    if answer is None:
        return None
    return 0.0 if answer == "yes" else 1.0

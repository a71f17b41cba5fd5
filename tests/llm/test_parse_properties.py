"""The verdict parser on arbitrary text (hypothesis): always 'yes', 'no' or None, never an
exception; explicit verdicts survive surrounding noise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from preflab.llm.parse import answer_to_p, parse_answer

noise = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
spaces = st.text(alphabet=" \t\n\r\u00a0\u2003", max_size=2000)


@settings(max_examples=200, deadline=None)
@given(st.one_of(noise, st.none(), st.binary(max_size=100).map(lambda b: b.decode("latin-1"))))
def test_any_text_parses_to_yes_no_or_none(text) -> None:
    r = parse_answer(text)
    assert r in ("yes", "no", None)
    assert answer_to_p(r) in (0.0, 1.0, None)


@settings(max_examples=150, deadline=None)
@given(prefix=noise, gap=spaces, verdict=st.sampled_from(["yes", "no", "YES", "No"]))
def test_final_verdict_after_noise_is_read(prefix, gap, verdict) -> None:
    text = prefix + "\n" + "Final answer:" + gap + "**" + verdict + "**"
    assert parse_answer(text) == verdict.lower()

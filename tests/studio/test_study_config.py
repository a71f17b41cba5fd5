"""StudyConfig (issue #61) checks its own fields: a config a study cannot run with (a blank
consent or instructions page, a NaN or infinite number, a negative reservation, a completion
code with spaces around it, a field of the wrong kind in a stored config) is refused with one
ConfigError naming each bad field and what it expects, never a TypeError or a blank page."""

from __future__ import annotations

import math

import pytest

from preflab.errors import ConfigError
from preflab.studio.study_config import StudyConfig


def test_the_defaults_and_edge_values_are_valid_and_round_trip() -> None:
    assert StudyConfig.from_json(StudyConfig().to_json()) == StudyConfig()
    edge = StudyConfig(
        cap=1,
        overlap=50,
        gold_rate=0.5,
        quota_answers=0,
        quota_minutes=0,
        practice_pairs=0,
        reserve_s=0,
        clip_s=2,  # a whole number for a float field
        completion_code="",
        consent_md="ok",
        instructions_md="ok",
    )
    assert StudyConfig.from_json(edge.to_json()) == edge


@pytest.mark.parametrize("field", ["consent_md", "instructions_md"])
@pytest.mark.parametrize("text", ["", "  \n\n\t "], ids=["empty", "whitespace"])
def test_a_blank_text_is_refused(field: str, text: str) -> None:
    with pytest.raises(ConfigError, match=f"{field} is empty or only whitespace; a study needs"):
        StudyConfig.from_json({field: text})


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("reserve_s", -1.0, "reserve_s must be ≥ 0 seconds"),
        ("side_z", math.nan, "side_z must be a finite number, got nan"),
        ("clip_s", math.inf, "clip_s must be a finite number, got inf"),
        ("quota_minutes", math.nan, "quota_minutes must be a finite number"),
        ("reserve_s", math.inf, "reserve_s must be a finite number"),
        ("completion_code", "   ", "completion_code must be at most 64 printable characters"),
        ("completion_code", " C0DE42", "without spaces at either end, got ' C0DE42'"),
        ("cap", "100", "cap must be a whole number, got '100'"),
        ("overlap", 2.5, "overlap must be a whole number, got 2.5"),
        ("cap", True, "cap must be a whole number, got True"),
        ("title", None, "title must be text, got None"),
        ("min_gold", 0, "min_gold must be ≥ 1"),
        ("min_answers", 0, "min_answers must be ≥ 1"),
        ("quota_answers", -1, "quota_answers must be ≥ 0"),
        ("cap", 0, "cap must be ≥ 1"),
        ("practice_pairs", 11, r"practice_pairs must be in \[0, 10\]"),
        ("completion_code", "C" * 65, "completion_code must be at most 64"),
        ("instructions_md", "x" * 20_001, "instructions_md must be at most 20000 characters"),
    ],
)
def test_a_value_a_study_cannot_run_with_is_refused_naming_the_field(
    field: str, value: object, expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        StudyConfig.from_json({field: value})


def test_every_bad_field_is_named_in_one_error() -> None:
    with pytest.raises(ConfigError) as err:
        StudyConfig(cap=0, reserve_s=-5, consent_md=" ")
    message = str(err.value)
    assert "cap must be ≥ 1 (the most people who may join), got 0" in message
    assert "reserve_s must be ≥ 0 seconds" in message and "got -5;" in message
    assert "consent_md is empty or only whitespace" in message

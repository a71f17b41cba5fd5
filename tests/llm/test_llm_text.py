"""Describers, prompt templates and answer parsing."""

from __future__ import annotations

import re

import numpy as np
import pytest

from preflab.env_families.grids import GridState, encode_state
from preflab.errors import ConfigError, DataError
from preflab.llm import (
    PromptTemplate,
    answer_to_p,
    describe_action,
    describe_state,
    known_describers,
    parse_answer,
    register_describer,
)
from preflab.llm.prompts import SECTIONS, TEMPLATE_FILES


def test_grid_description_names_positions_key_door_and_goal() -> None:
    s = GridState(
        layout="Lock",
        agent=(2, 2),
        direction=0,
        carrying=(False,),
        door_open=(False,),
        keys=((1, 3),),
        doors=((3, 2),),
        goal=(5, 4),
    )
    text = describe_state("PrefLab/Lock-v0", encode_state(s))
    assert "(2, 2) facing east" in text
    assert "yellow key lies at (1, 3)" in text
    assert "yellow door at (3, 2) is locked" in text
    assert "goal is at (5, 4)" in text
    assert "in front of the agent is the locked yellow door" in text
    carrying = GridState(**{**s.__dict__, "carrying": (True,), "keys": (None,)})
    assert "carries the yellow key" in describe_state("PrefLab/Lock-v0", encode_state(carrying))
    assert describe_action("PrefLab/Lock-v0", np.eye(4)[3]) == "The agent chose to interact."


def test_mujoco_describers() -> None:
    assert {"InvertedPendulum-v5", "Reacher-v5", "Hopper-v5"} <= set(known_describers())
    pend = describe_state("InvertedPendulum-v5", np.array([0.1, 0.6, -0.2, -1.0]))
    assert "leans to the right by 0.60 radians" in pend and "leftward" in pend
    assert "stands vertically" in describe_state("InvertedPendulum-v5", np.array([0, 0.0, 0, 0.5]))
    reacher = np.array([1, 1, 0, 0, 0.1, -0.1, 0.5, 0.0, 0.03, 0.04])
    assert "0.050 m away" in describe_state("Reacher-v5", reacher)
    hop = np.zeros(11)
    hop[0], hop[5] = 1.25, 0.8
    assert "height 1.25 m" in describe_state(
        "Hopper-v5", hop
    ) and "forward at 0.80" in describe_state("Hopper-v5", hop)


def test_describer_errors_and_user_registration() -> None:
    with pytest.raises(ConfigError, match="no state describer for environment 'Nope-v1'"):
        describe_state("Nope-v1", np.zeros(3))
    with pytest.raises(DataError, match="4 numbers, got 3"):
        describe_state("InvertedPendulum-v5", np.zeros(3))
    with pytest.raises(DataError, match="NaN"):
        describe_state("InvertedPendulum-v5", np.array([0, np.nan, 0, 0]))
    register_describer("Test/Ball-v0", lambda o: f"The ball is at {o[0]:.1f}.", overwrite=True)
    assert describe_state("Test/Ball-v0", np.array([2.0])) == "The ball is at 2.0."
    with pytest.raises(ConfigError, match="already registered"):
        register_describer("Test/Ball-v0", lambda o: "")


@pytest.mark.parametrize("env_id", sorted(TEMPLATE_FILES))
def test_packaged_templates_have_four_parts_and_render(env_id: str) -> None:
    t = PromptTemplate.load(env_id)
    for sec in SECTIONS:
        assert getattr(t, sec).strip()
    msgs = t.render("STATE-ZERO", "STATE-ONE")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == t.preamble
    user = msgs[1]["content"]
    # exemplar, then the sample with both states in order, then the ending
    assert user.index(t.exemplar[:30]) < user.index("STATE-ZERO") < user.index("STATE-ONE")
    assert user.rstrip().endswith(t.ending.rstrip())


def test_custom_template_file_and_bad_templates(tmp_path) -> None:
    good = (
        "# comment\n[preamble]\nP\n[exemplar]\nE\n[sample]\nA=$state_a B=$state_b\n[ending]\nEnd?\n"
    )
    f = tmp_path / "mine.txt"
    f.write_text(good)
    t = PromptTemplate.load(f)
    assert t.render_text("x", "y") == "P\n\nE\n\nA=x B=y\n\nEnd?"
    with pytest.raises(ConfigError, match="lacks section"):
        PromptTemplate.parse("[preamble]\nP\n[sample]\n$state_a $state_b\n")
    with pytest.raises(ConfigError, match=r"must contain \$state_b"):
        PromptTemplate.parse(good.replace("B=$state_b", ""))
    with pytest.raises(ConfigError, match="unknown or malformed placeholder"):
        PromptTemplate.parse(good.replace("B=$state_b", "B=$state_b $foo"))
    with pytest.raises(ConfigError, match="no prompt template"):
        PromptTemplate.load("Nope-v0")
    with pytest.raises(DataError, match="non-empty"):
        t.render("", "y")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes", "yes"),
        ("no", "no"),
        ("Yes, the pole currently stands vertically. Therefore, the answer is yes.", "yes"),
        ("**No.** The agent moved away from the key.", "no"),
        (
            "The agent moved closer to the key, so it made progress. Therefore, the answer is yes.",
            "yes",
        ),
        ("At first one might say yes, but the agent turned away. The answer is: No", "no"),
        ("Let me think.\nThe key is behind.\nFinal answer: **yes**", "yes"),
        ("A: No, it fell.", "no"),
        ("Reasoning...\nNo", "no"),
        ("  YES!  ", "yes"),
        ("answer = no", "no"),
        ("The answer is yes because the pole rises.", "yes"),
        ("Answer: no (it fell)", "no"),
    ],
)
def test_parse_yes_no_forms(text: str, expected: str) -> None:
    assert parse_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        None,
        "I cannot tell.",
        "Maybe",
        "The state has no key and yes a door, hard to say.",
        '{"garbage": 1}',
        "Yesterday the agent moved.",
        "Nobody knows",
        # a yes or no that words follow is no verdict (each was read as one before)
        "No doubt, the pole stays up, so the transition is good.",
        "No matter how you look at it, this is a good move.",
        "The answer is no longer obvious.",
        "yes or no? I can't decide.",
    ],
)
def test_parse_unparseable(text: str | None) -> None:
    assert parse_answer(text) is None


def test_answer_to_p_convention() -> None:
    # "is the transition from State[0] (a) to State[1] (b) good?" yes → b better → P(a ≻ b) = 0
    assert answer_to_p("yes") == 0.0
    assert answer_to_p("no") == 1.0
    assert answer_to_p(None) is None


GOOD_TEMPLATE = "[preamble]\nP\n[exemplar]\nE\n[sample]\nA=$state_a B=$state_b\n[ending]\nEnd?\n"


def test_a_template_file_without_a_suffix_is_read(tmp_path, monkeypatch) -> None:
    # --llm.template is "a file path": an existing file loads whatever its name
    (tmp_path / "nosuffix").write_text(GOOD_TEMPLATE)
    monkeypatch.chdir(tmp_path)
    assert PromptTemplate.load("nosuffix").render_text("x", "y") == "P\n\nE\n\nA=x B=y\n\nEnd?"
    assert PromptTemplate.load(tmp_path / "nosuffix").name == "nosuffix"


def test_a_template_file_that_is_not_utf8_is_named(tmp_path) -> None:
    f = tmp_path / "latin.txt"
    f.write_bytes(GOOD_TEMPLATE.replace("P\n", "Prüfung\n").encode("latin-1"))
    named = re.escape(f"prompt template {f} is not UTF-8 text")
    with pytest.raises(ConfigError, match=rf"{named}.*must be UTF-8 text"):
        PromptTemplate.load(f)
    f.write_bytes(b"\xef\xbb\xbf" + GOOD_TEMPLATE.encode())  # a byte-order mark (Notepad)
    assert PromptTemplate.load(f).preamble == "P"

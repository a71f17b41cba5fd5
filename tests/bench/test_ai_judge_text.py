"""``preflab bench ai_judge --view states`` (issue 58): the segment-pair question over described
states reaches a text-only server as plain text (each clip's key steps in words, read from the
simulator states), the answers are parsed to labels and scored against the oracle. The server is
a real local HTTP server that answers from the text it received (the clip whose described speeds
are higher on average); the expected accuracy is derived here from the set's true returns and
that rule."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from preflab.testing.llmserver import Reply, ScriptedServer, completion
from preflab.vlm import VLMTemplate
from preflab.vlm.frames import described_states
from preflab_bench import ai_judge as aj

_SPEED = re.compile(r"moving (forward|backward) at ([0-9.]+) m/s")


def _mean_speed(text: str) -> float:
    return float(
        np.mean([(1 if d == "forward" else -1) * float(v) for d, v in _SPEED.findall(text)])
    )


def _rule(user: str) -> str:
    """Answer 1 when clip 1's described speeds are higher on average, else 2."""
    one, two = user.split("Clip 2:", 1)
    return "Answer: 1" if _mean_speed(one) > _mean_speed(two) else "Answer: 2"


def _script(req: dict[str, Any], n: int) -> Reply:
    user = req["messages"][-1]["content"]
    assert isinstance(user, str), "a text-only request carries its content as one string"
    content = f"The first clip looks steadier.\n{_rule(user)}"
    usage = {"prompt_tokens": len(user.split()), "completion_tokens": len(content.split())}
    return Reply(body=completion(req, n, content, usage))


def test_states_view_asks_a_text_model_and_scores_its_answers(tmp_path: Path) -> None:
    out = tmp_path / "ai_judge_text.md"
    with ScriptedServer(_script) as srv:
        code = aj.main(
            [
                "--view", "states", "--prompt", "one-stage", "--envs", "cheetah",
                "--pairs", "6", "--frames", "3", "--base-url", srv.base_url,
                "--model", "text-model", "--max-tokens", "64", "--out", str(out),
            ]
        )  # fmt: skip
        bodies = list(srv.bodies)
    assert code == 0
    assert len(bodies) == 6 and all(b["max_tokens"] == 64 for b in bodies)
    user = bodies[0]["messages"][-1]["content"]
    assert "Step 1 of 25: moving" in user and "torso pitched" in user
    assert user.count("Step ") == 6  # three key steps per clip

    # the expected accuracy from the set's oracle and the server's rule over the same text
    pairs, truth = aj.load_set(aj.SET_PATH, "cheetah")
    described = aj.as_described(pairs[:6], "cheetah")
    tpl = VLMTemplate.load("one-stage")
    right = 0
    for (a, b), t in zip(described, truth[:6], strict=True):
        msgs = tpl.frames_messages(
            aj.TASKS["cheetah"], described_states(a, 3), described_states(b, 3)
        )
        right += (_rule(msgs[-1]["content"]) == "Answer: 1") == (t == 1.0)
    row = json.loads(out.with_name("ai_judge_text_runs.jsonl").read_text().splitlines()[-1])
    assert row["answers"] == 6 and row["unparseable"] == 0 and row["failed"] == 0
    assert row["accuracy"] == right / 6
    assert row["prompt_tokens"] == np.mean(
        [len(b["messages"][-1]["content"].split()) for b in bodies]
    )
    assert row["completion_tokens"] == 7 and "--view states" in row["command"]
    assert "key steps' states in words" in out.read_text()

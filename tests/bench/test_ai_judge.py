"""``bench ai_judge``'s accuracy interval: the Wilson score interval of the decisive answers
(the library's, :func:`preflab.sources.routing.calibration.wilson_interval`), checked against
the closed form on a run whose accuracy is known in advance."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from preflab.testing.llmserver import Reply, ScriptedServer, completion
from preflab_bench import ai_judge as aj

Z = 1.959963984540054
"""The standard normal's 97.5 % quantile."""


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval by its closed form: centre (p + z²/2n) / (1 + z²/n),
    half-width z √(p(1 − p)/n + z²/4n²) / (1 + z²/n)."""
    p, d = k / n, 1 + Z * Z / n
    centre = (p + Z * Z / (2 * n)) / d
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / d
    return centre - half, centre + half


def test_the_closed_form_gives_the_tabulated_interval() -> None:
    assert _wilson(8, 10) == pytest.approx((0.49016, 0.94332), abs=1e-5)


def _second(req: dict[str, Any], n: int) -> Reply:
    content = "Clip 2 looks better.\nAnswer: 2"
    return Reply(body=completion(req, n, content, {"prompt_tokens": 1, "completion_tokens": 1}))


def test_the_accuracy_interval_is_wilsons_over_the_decisive_answers(tmp_path: Path) -> None:
    """A judge that always prefers the second clip is right on the pairs whose oracle prefers
    the second: 7 of the cheetah set's first 10. Its interval is Wilson's for 7 of 10, about
    [0.3968, 0.8922]."""
    _pairs, truth = aj.load_set(aj.SET_PATH, "cheetah")
    right = int((truth[:10] == 0.0).sum())
    assert right == 7
    out = tmp_path / "ai_judge.md"
    with ScriptedServer(_second) as srv:
        code = aj.main(
            [
                "--view", "states", "--prompt", "one-stage", "--envs", "cheetah",
                "--pairs", "10", "--frames", "3", "--base-url", srv.base_url,
                "--model", "text-model", "--max-tokens", "64", "--out", str(out),
            ]
        )  # fmt: skip
    assert code == 0
    row = json.loads(out.with_name("ai_judge_runs.jsonl").read_text().splitlines()[-1])
    assert row["answers"] == 10 and row["accuracy"] == right / 10
    assert row["ci"] == pytest.approx(list(_wilson(right, 10)), abs=1e-9)
    assert row["ci"] == pytest.approx([0.39678, 0.89221], abs=1e-5)
    assert "| cheetah | 10 | 10 |" in out.read_text() and "[0.40, 0.89]" in out.read_text()

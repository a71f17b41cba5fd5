"""Shared pieces of every benchmark's report."""

from __future__ import annotations

import pytest

from preflab.bench._report import ci_side, invocations


@pytest.mark.parametrize(
    ("values", "side"),
    [([0.9, 1.0, 1.1], 1), ([-0.9, -1.0, -1.1], -1), ([-1.0, 1.0], 0), ([5.0], None), ([], None)],
)
def test_ci_side(values: list[float], side: int | None) -> None:
    assert ci_side(values) == side


def test_ci_side_uses_the_t_interval() -> None:
    # mean 1, sd 1, n = 3: half-width t(0.975, 2) · 1/√3 = 2.48 spans 0; n = 12: 0.64 does not
    assert ci_side([0.0, 1.0, 2.0]) == 0
    assert ci_side([0.0, 1.0, 2.0] * 4) == 1


def test_invocations_lists_each_command_once() -> None:
    rows = [{"command": "preflab bench x --seeds 1"}, {"command": "preflab bench x --seeds 0"}]
    rows += [{"command": "preflab bench x --seeds 1"}, {"seed": 2}]
    assert invocations(rows) == (
        "Invocations that recorded these runs:\n\n"
        "- `preflab bench x --seeds 0`\n- `preflab bench x --seeds 1`\n"
    )
    assert invocations([{"seed": 0}]) == ""

"""frontier-tuning-walker's selection rule (issue #59), on constructed ratios and on a report of
constructed rows whose IQM ratios are known exactly (every seed returns the same)."""

from pathlib import Path

import pytest

from preflab.errors import ConfigError
from preflab_bench._frontier_pick import CANDIDATES, pick
from preflab_bench.efficiency import ARM_PARTS, report
from tests.bench.test_efficiency import _rows
from tests.bench.test_plan import entry

FIVE = ("pretrain", "surf", "qpa", "rime", "rune")
PARTS = {**{c: ARM_PARTS[c] for c in FIVE}, "combo": FIVE}


def _ratios(**over: float) -> dict[str, float]:
    return {c: 0.5 for c in CANDIDATES} | over


def test_the_highest_ratio_wins_and_runs_as_a_combo_of_its_parts() -> None:
    p = pick(_ratios(qpa=0.8), PARTS)
    assert (p.arm, p.tied, p.flags) == ("qpa", ("qpa",), "--arms combo --combo qpa")
    p = pick(_ratios(combo=0.9, rime=0.85), PARTS)
    assert p.arm == "combo" and p.flags == "--arms combo --combo pretrain surf qpa rime rune"


def test_rime_runs_with_the_pretraining_its_warm_start_needs() -> None:
    assert pick(_ratios(rime=0.7), PARTS).flags == "--arms combo --combo pretrain rime"


def test_a_tie_within_a_hundredth_goes_to_fewer_parts_then_the_rules_order() -> None:
    # combo highest, surf 0.009 below it and pretrain 0.0095 below: all three tied; the single
    # additions come before combo, pretrain before surf in the rule's order
    p = pick(_ratios(combo=0.809, surf=0.8, pretrain=0.7995), PARTS)
    assert p.arm == "pretrain" and p.tied == ("pretrain", "surf", "combo")
    assert p.best_ratio == pytest.approx(0.809)
    # 0.011 below the highest is not a tie
    p = pick(_ratios(combo=0.811, surf=0.8), PARTS)
    assert p.arm == "combo" and p.tied == ("combo",)
    # the window is measured from the highest, not chained: rune is within 0.01 of qpa, which
    # is within 0.01 of surf, but 0.016 below surf
    p = pick(_ratios(surf=0.816, qpa=0.808, rune=0.8), PARTS)
    assert p.tied == ("surf", "qpa") and p.arm == "surf"


def test_plain_is_not_a_candidate_and_every_candidate_is_needed() -> None:
    ratios = _ratios() | {"plain": 2.0}
    assert pick(ratios, PARTS).arm == "pretrain"  # all tied at 0.5: the first in the order
    with pytest.raises(ConfigError, match="missing or not finite: qpa, rune"):
        pick({c: 0.5 for c in CANDIDATES if c not in ("qpa", "rune")}, PARTS)
    with pytest.raises(ConfigError, match="not finite: surf"):
        pick(_ratios(surf=float("nan")), PARTS)


def _tuning_plan(tmp_path: Path) -> Path:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        entry(
            "tune",
            bench='"efficiency"',
            arms='["combo", "pretrain", "surf", "qpa", "rime", "rune", "plain", "sac_true_reward"]',
            eval_seeds="[0, 1, 2]",
            tuning_seeds="[]",
            budget="{ env_steps = 1000, labels = [100] }",
            target='{ value = 0.0, direction = "above", kind = "selection" }',
        )
    )
    return plan


def _tuning_rows(returns: dict[str, float], combo_parts: list[str]) -> list[dict]:
    rows = _rows("sac_true_reward", 0, [200.0] * 3, plan="tune")
    for arm, r in returns.items():
        parts = combo_parts if arm == "combo" else list(ARM_PARTS[arm])
        rows += _rows(arm, 100, [r] * 3, plan="tune", parts=parts)
    return rows


def test_the_report_of_a_selection_entry_names_the_pick_once_all_runs_exist(
    tmp_path: Path,
) -> None:
    """SAC returns 200 on every seed, so each ratio is the arm's return / 200 exactly."""
    plan = _tuning_plan(tmp_path)
    returns = {
        "combo": 170.0,
        "pretrain": 150.0,
        "surf": 120.0,
        "qpa": 168.5,  # 0.8425, within 0.01 of combo's 0.85
        "rime": 160.0,
        "rune": 110.0,
        "plain": 190.0,  # above all: not a candidate
    }
    rows = _tuning_rows(returns, list(FIVE))
    md = report(rows[:-1], plan)  # one run missing: no pick
    assert "Selection" not in md and "missing" in md
    md = report(rows, plan)
    assert (
        "**Selection (tune): best = qpa** (tied within 0.01 of the highest (0.85) with combo" in md
    )
    assert "`--arms combo --combo qpa`" in md
    assert "combo 0.85, qpa 0.8425, rime 0.8, pretrain 0.75, surf 0.6, rune 0.55." in md


def test_combo_rows_naming_different_parts_give_no_pick(tmp_path: Path) -> None:
    plan = _tuning_plan(tmp_path)
    returns = dict.fromkeys(("combo", "pretrain", "surf", "qpa", "rime", "rune", "plain"), 100.0)
    rows = _tuning_rows(returns, list(FIVE))
    rows[-1 - 3 * 6]["parts"] = ["pretrain", "surf"]  # one combo row of another combo
    md = report(rows, plan)
    assert "Selection" not in md and "IQM ratio" not in md  # not read: no pick, no number
    assert (
        "plan entry `tune`: **not read**, its rows did not all run the entry's configuration" in md
    )
    assert "the combo rows name different parts: pretrain surf; pretrain surf qpa rime rune" in md

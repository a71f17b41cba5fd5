"""bench routing's report (issue 58): people's labels to reach 80 % of SAC on the true reward,
alone and routed, and the verdict rule."""

from pathlib import Path

from preflab_bench.routing import labels_verdict, report
from tests.bench.test_plan import entry


def _rows(arm: str, budget: int, returns: list[float], **extra: object) -> list[dict]:
    return [
        {
            "bench": "routing",
            "env": "dm_control/walker-walk-v0",
            "arm": arm,
            "label_budget": budget,
            "seed": seed,
            "return": r,
            "steps": 1000,
            "wall_s": 1.0,
            "command": "preflab bench routing",
            **extra,
        }
        for seed, r in enumerate(returns)
    ]


def test_the_verdict_needs_sixty_percent_fewer_people_labels() -> None:
    assert labels_verdict(40, 100, 200) == "met"  # 40 ≤ 0.4 × 100
    assert labels_verdict(50, 100, 200) == "missed"
    assert labels_verdict(None, 100, 200) == "missed"  # routing never reaches the share
    assert labels_verdict(100, None, 200) == "met"  # people off the grid count as 2 × 200
    assert labels_verdict(200, None, 200) == "missed"
    # people reach it at the grid's smallest budget: the grid cannot show 60 % fewer
    assert labels_verdict(100, 100, 1000, bottom=100) == "not shown"


def test_labels_to_reach_per_arm_and_the_routing_columns(tmp_path: Path) -> None:
    """SAC returns 100 on every seed; routed clears 0.8 at 25 people labels, people at 100."""
    rows = _rows("sac_true_reward", 0, [100.0] * 6)
    routed = {"people_labels": 25, "ai_labels": 70, "model_labels": 5, "ai_share": 0.7}
    routed |= {"ai_accuracy": 0.8, "ai_accuracy_ci": [0.6, 0.9], "ai_true_accuracy": 0.76}
    rows += _rows("routed", 25, [90.0] * 6, label_error=0.05, **routed)
    rows += _rows("people", 25, [50.0] * 6, label_error=0.0, people_labels=25)
    rows += _rows("people", 100, [85.0, 95.0] * 3, label_error=0.0, people_labels=100)
    md = report(rows, tmp_path / "no-plan.toml")
    assert "People's labels to reach 80% of SAC on the true reward" in md
    assert "people 100, routed 25." in md
    assert "| routed | 25 | 0 | 25 | 70 | 5 | 0.700 | 0.800 [0.600, 0.900] | 0.760 | 0.050 |" in md


def test_a_planned_entry_gets_its_verdict_once_every_run_exists(tmp_path: Path) -> None:
    """Entry 'rt': seeds 0-2, grid [100, 400, 1000], routed at [100, 400] only. SAC 100; people
    reach 0.8 only at 400, routed at 100 (≤ 0.4 × 400): met. Without routed's 400-label runs the
    entry is incomplete; it needs no routed run at 1000."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        entry(
            "rt",
            bench='"routing"',
            arms='["people", "routed", "sac_true_reward"]',
            eval_seeds="[0, 1, 2]",
            tuning_seeds="[]",
            budget="{ env_steps = 1000, labels = [100, 400, 1000], routed_labels = [100, 400] }",
            target='{ value = 0.8, direction = "above", kind = "fraction_of_true_reward" }',
        )
    )
    rows = _rows("sac_true_reward", 0, [100.0] * 3, plan="rt")
    rows += _rows("people", 100, [50.0] * 3, plan="rt") + _rows(
        "people", 400, [90.0] * 3, plan="rt"
    )
    rows += _rows("people", 1000, [95.0] * 3, plan="rt")
    rows += _rows("routed", 100, [90.0] * 3, plan="rt")
    assert "Verdict" not in report(rows, plan)  # routed at 400 is missing: no look yet
    rows += _rows("routed", 400, [95.0] * 3, plan="rt")
    md = report(rows, plan)
    assert "people 400, routed 100." in md
    assert "**Verdict (rt, 1 look(s), 95.0% intervals): met.**" in md

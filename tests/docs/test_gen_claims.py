"""docs/gen_claims.py: the claims page's generated counts are the run logs' and the plan's,
and docs/concepts/claims.md's table holds against what it names."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from preflab_bench._plan import load_plan, parse_plan
from tests.bench.test_plan import entry
from tests.docs.test_claims import _intervals_hold, table_rows

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import gen_claims  # noqa: E402

CLAIMS = (ROOT / "docs" / "concepts" / "claims.md").read_text(encoding="utf-8")
HEADER = (
    "| paper | headline claim (where) | PrefLab's evidence | plan entry | result file | verdict |"
)


def test_planned_runs_count_seeds_arms_and_label_budgets() -> None:
    plan = parse_plan(
        entry("two-arms").replace('env = "dm_control/walker-walk-v0"', 'envs = ["A", "B"]')
        + entry("budgets", eval_seeds="[20, 21]", arms='["plain", "all", "sac_true_reward"]',
                budget="{ labels = [50, 100, 200] }")
        + entry("reuse", eval_seeds="[20, 21]", reuse='{ sac_true_reward = "budgets" }')
    )  # fmt: skip
    # 2 envs x 3 seeds x 2 arms; 2 seeds x (2 arms x 3 budgets + SAC once); 2 seeds x pebble
    assert [gen_claims.planned(plan, plan.entry(i)) for i in plan.ids()] == [12, 14, 2]


def test_the_queued_entries_count_what_their_notes_say() -> None:
    """Each note states its total: 60 (mujoco-700-fresh), 30 (crowd-ppo-walker2m), 80
    (groupwise-table1-1m), 100 (frontier-walker-cheetah), 60 (routing-walker-sbx100k)."""
    plan = load_plan(gen_claims.PLAN)
    want = {
        "mujoco-700-fresh": 60,
        "crowd-ppo-walker2m": 30,
        "groupwise-table1-1m": 80,
        "frontier-walker-cheetah": 100,
        "routing-walker-sbx100k": 60,
        "llm-fig7-uniform-acc90": 10,
        "efficiency-walker-sbx100k": 30,
    }
    assert {i: gen_claims.planned(plan, plan.entry(i)) for i in want} == want


def test_runs_done_and_wall_come_from_the_rows(tmp_path: Path) -> None:
    rows = [
        {"plan": "e", "seed": 1, "wall_s": 1800.0},
        {"plan": "e", "seed": 2, "wall_s": 1800.0},
        {"plan": "f", "seed": 1, "true": {"wall_s": 60.0}, "preflab": {"wall_s": 120.0}},
        {"plan": "g", "seed": 1},
        {"seed": 9, "wall_s": 5.0},
    ]
    (tmp_path / "x_runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    by = gen_claims.rows_by_entry(tmp_path)
    assert sorted(by) == ["e", "f", "g"] and len(by["e"].rows) == 2
    assert gen_claims.wall(by["e"]) == (3600.0, "`wall_s`")
    assert gen_claims.wall(by["f"]) == (180.0, "`true.wall_s` + `preflab.wall_s`")
    assert gen_claims.wall(by["g"]) == (0.0, "no wall field in its rows")


def test_fill_replaces_every_mark() -> None:
    text = gen_claims.fill(CLAIMS, history=False)
    assert "<!--" not in text
    plan = load_plan(gen_claims.PLAN)
    by = gen_claims.rows_by_entry()
    queued = re.findall(r"<!-- runs ([\w-]+) -->", CLAIMS)
    assert queued  # the page names entries still running; each mark becomes its count
    for plan_id in queued:
        done = len(by[plan_id].rows) if plan_id in by else 0
        planned = gen_claims.planned(plan, plan.entry(plan_id))
        unit = "seeds" if plan_id in gen_claims.BY_SEED else "runs"
        if unit == "runs":  # rows counted here, independently of the page's own count
            assert f"queue: {done} of {planned} runs done" in text, plan_id
        else:
            assert gen_claims.runs_phrase(plan, by, plan_id) in text, plan_id
    assert "| `llm-fig7-uniform-acc60` | 2026-12-06 |" in text


def _claim_rows() -> list[list[str]]:
    return table_rows(CLAIMS, HEADER)


def test_every_claim_row_names_entries_and_files_that_exist() -> None:
    plan = load_plan(gen_claims.PLAN)
    ids = set(plan.ids())
    papers = set()
    for paper, claim, evidence, entries, files, verdict in _claim_rows():
        papers.add(paper[:3])
        named = set(re.findall(r"`([a-z0-9][a-z0-9-]+)`", entries))
        assert named <= ids, f"{claim[:40]}: no plan entry {sorted(named - ids)}"
        found = re.findall(r"`([a-z0-9_]+\.md)`", files)
        for f in found:
            assert (gen_claims.RESULTS / f).is_file(), f"{claim[:40]}: no {f}"
        _intervals_hold(evidence + verdict, found, claim[:40])
        if re.search(r"\*\*(met|missed|not shown)\*\*", verdict):
            assert named and found, f"{claim[:40]}: a verdict needs its entry and file"
        if not named:
            assert "exploratory" in verdict or "not tested" in verdict, claim[:40]
        for mark in re.findall(r"<!-- runs ([a-z0-9-]+) -->", verdict):
            assert mark in named, f"{claim[:40]}: counts {mark}, names {sorted(named)}"
    assert papers == {"000", "001", "002", "003", "004"}

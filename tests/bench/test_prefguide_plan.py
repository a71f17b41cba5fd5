"""``preflab bench prefguide --plan``: one invocation per seed with the entry's budgets, a seed
stopped part-way finished from its progress file (its finished runs kept, never made twice), rows
in the run log only for complete seeds, and a report that gives the verdict only when every
seed exists."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from preflab.errors import ConfigError, DataError
from preflab_bench._plan import load_plan
from preflab_bench._prefguide_plan import expected_pieces, piece, plan_report, run_planned_seed
from preflab_bench.prefguide import main, run_seed
from tests.bench.test_smoke_all import check_run_logs, check_tables

ENTRY = """
[[experiment]]
id = "prefguide-tiny"
bench = "prefguide"
question = "Does voting beat individual at a tiny budget?"
arms = ["voting", "individual", "regression"]
eval_seeds = [5, 6]
tuning_seeds = []
budget = { population = "mixed", evaluators = 2, human_steps = 90, post_steps = 30, steps_per_round = 90, item_length = 3, max_pairs = 200, algo = "sac", n_envs = 1, eval_episodes = 1, note = "test" }
metric = "final true return"
target = { kind = "difference", value = 0.0, direction = "above", note = "IQM(voting) - IQM(individual)" }
looks = 1
committed = 2026-12-06
"""
BUDGET = [
    "--evaluators", "2", "--human-steps", "90", "--post-steps", "30", "--steps-per-round", "90",
    "--item-length", "3", "--max-pairs", "200", "--eval-episodes", "1",
]  # fmt: skip


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(ENTRY)
    return path


def test_planned_seeds_resume_and_reach_the_log_and_the_verdict_only_when_complete(
    tmp_path: Path, plan: Path
) -> None:
    entry = load_plan(plan).entry("prefguide-tiny")
    out, jsonl = tmp_path / "prefguide_tiny.md", tmp_path / "prefguide_tiny_runs.jsonl"
    root = tmp_path / "root"
    common = ["--plan", "prefguide-tiny", "--plan-file", str(plan), "--jsonl", str(jsonl)]
    common += ["--out", str(out)]
    with pytest.raises(ConfigError, match="other budgets"):
        main([*common, "--seeds", "5", "--run-root", str(root)])  # the bench's default budgets
    with pytest.raises(ConfigError, match="--run-root"):
        main([*common, *BUDGET, "--seeds", "5"])
    argv = [*common, *BUDGET, "--seeds", "5", "--run-root", str(root)]
    assert main(argv) == 0
    text = out.read_text()
    assert "Incomplete: 1 of 2 seeds made" in text
    assert not any(v in text for v in ("**met**", "**missed**", "**not shown**"))
    assert {r["command"] for r in _rows(jsonl)} == {"preflab bench prefguide " + " ".join(argv)}
    assert {piece(r) for r in _rows(jsonl)} == expected_pieces(2, entry.arms)

    cmd6 = "preflab bench prefguide " + " ".join([*argv[:-3], "6", *argv[-2:]])

    def stopped(*args: object, **kw: object) -> None:  # an invocation cut after voting
        run_seed(*args, **{**kw, "methods": ["voting"]})  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match="still lacks"):
        run_planned_seed(entry, 6, root=root, jsonl=jsonl, command_line=cmd6, run=stopped)
    assert {r["seed"] for r in _rows(jsonl)} == {5}  # the queue does not count seed 6 done
    progress = root / "s6-progress.jsonl"
    partial = _rows(progress)
    voting = {r["evaluator"]: r["true_return"] for r in partial if r.get("method") == "voting"}
    assert len(voting) == 2

    # a human phase that does not reproduce cannot be continued
    text = progress.read_text()
    human = next(r for r in partial if r["kind"] == "human")
    progress.write_text(text.replace(json.dumps(human), json.dumps(human | {"n_items": -1})))
    with pytest.raises(DataError, match="start the seed over"):
        run_planned_seed(entry, 6, root=root, jsonl=jsonl, command_line=cmd6, run=run_seed)
    progress.write_text(text)

    assert run_planned_seed(entry, 6, root=root, jsonl=jsonl, command_line=cmd6, run=run_seed)
    rows6 = [r for r in _rows(jsonl) if r["seed"] == 6]
    assert sorted(map(piece, rows6), key=str) == sorted(expected_pieces(2, entry.arms), key=str)
    assert {r["evaluator"]: r["true_return"] for r in rows6 if r.get("method") == "voting"} == (
        voting  # the runs of the stopped invocation are kept, not made again
    )
    assert all(r["plan"] == "prefguide-tiny" and r["command"] == cmd6 for r in rows6)
    assert not (root / "s6-work").exists()
    assert not run_planned_seed(  # a seed in the log is not made again
        entry, 6, root=root, jsonl=jsonl, command_line=cmd6, run=run_seed
    )
    with pytest.raises(ConfigError, match="not an evaluation seed"):
        run_planned_seed(entry, 7, root=root, jsonl=jsonl, command_line=cmd6, run=run_seed)

    assert main([*common, "--report"]) == 0
    text = out.read_text()
    assert "Incomplete" not in text
    line = next(x for x in text.splitlines() if x.startswith("**IQM(voting) − IQM(individual)"))
    assert "2 seeds" in line and "looks 1" in line
    # per seed, voting's mean final return over the evaluators minus individual's; with two
    # seeds a paired resample is (5, 5), (5, 6) or (6, 6) with chances 1/4, 1/2, 1/4, so the
    # interval's ends are exactly the smaller and the larger seed difference
    rows = _rows(jsonl)

    def mean_return(method: str, seed: int) -> float:
        return float(
            np.mean(
                [r["true_return"] for r in rows if (r.get("method"), r["seed"]) == (method, seed)]
            )
        )

    diff = [mean_return("voting", s) - mean_return("individual", s) for s in (5, 6)]
    lo, hi = min(diff), max(diff)
    assert f"[{lo:.4g}, {hi:.4g}]**" in line
    expected = "met" if lo > 0 else "missed" if hi < 0 else "not shown"
    assert f"target above 0.0: **{expected}**." in line, line
    assert "| top tier | IQM(voting) − IQM(individual) | 2 |" in text
    assert "## Final true return after the post-human phase" in text
    check_tables(out)
    check_run_logs(tmp_path, "prefguide")


def _synthetic(seeds: list[int], shift: dict[str, float]) -> list[dict]:
    """Complete rows: evaluator k of seed s returns -100·k - s + shift[method]."""
    rows: list[dict] = []
    for s in seeds:
        rows.append({"kind": "reference", "seed": s, "true_return": 0.0, "command": "c"})
        for k, tier in enumerate(("top", "middle")):
            e = f"evaluator-{k}"
            rows.append({"kind": "human", "seed": s, "evaluator": e, "tier": tier, "command": "c"})
            rows += [
                {"kind": "post", "seed": s, "evaluator": e, "method": m, "command": "c",
                 "true_return": -100.0 * k - s + d}
                for m, d in shift.items()
            ]  # fmt: skip
    return rows


def test_the_verdict_is_the_paired_iqm_difference_of_the_per_seed_means(plan: Path) -> None:
    entry = load_plan(plan).entry("prefguide-tiny")
    rows = _synthetic([5, 6], {"voting": 10.0, "individual": 0.0, "regression": -5.0})
    text = plan_report(rows, entry, looks=1)
    # every seed's difference is exactly +10 (voting − individual), +15 and +5: intervals collapse
    assert "all evaluators, 2 seeds: 10 [10, 10]** (95.00% stratified" in text
    assert "target above 0.0: **met**" in text
    assert "| top tier | IQM(voting) − IQM(regression) | 2 | 15 [15, 15] | – |" in text
    assert "| all evaluators | IQM(individual) − IQM(regression) | 2 | 5 [5, 5] | – |" in text
    low = _synthetic([5, 6], {"voting": -1.0, "individual": 0.0, "regression": 0.0})
    assert "target above 0.0: **missed**" in plan_report(low, entry, looks=1)
    # voting − individual is +10 on seed 5 and −4 on seed 6: the IQM difference (+3) is above 0
    # but the interval is not: a paired resample's difference is seed 5's, seed 6's or
    # their mean, so its ends are −4 and 10
    mixed = [
        r | {"true_return": r["true_return"] - 14.0}
        if r.get("method") == "voting" and r["seed"] == 6
        else r
        for r in rows
    ]
    text = plan_report(mixed, entry, looks=1)
    assert "all evaluators, 2 seeds: 3 [-4, 10]** (95.00% stratified" in text
    assert "target above 0.0: **not shown**" in text
    assert "Incomplete: 1 of 2" in plan_report(rows[: len(rows) // 2], entry, looks=1)

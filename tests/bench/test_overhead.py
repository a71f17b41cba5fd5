"""The overhead report against hand-computed ratios and phase shares."""

from __future__ import annotations

from preflab_bench.overhead import PHASES, report
from tests.bench.test_smoke_all import tables


def _run(cpu: float, steps: int, **phases: float) -> dict:
    full = {p: 0.0 for p in PHASES} | {k.replace("_", " "): v for k, v in phases.items()}
    return {"cpu_s": cpu, "wall_s": cpu, "env_steps": steps, "true_return": 0.0, "phases": full}


def _rows(preflab_cpu: float) -> list[dict]:
    true = _run(10.0, 1000, policy_update=8.0, rollouts=2.0)
    extra = preflab_cpu - 10.0
    mine = _run(preflab_cpu, 1000, policy_update=8.0, rollouts=2.0 + extra / 2)
    mine["phases"]["reward fit"] = extra / 2
    return [{"arm": "ppo", "seed": s, "labels": 100, "true": true, "preflab": mine} for s in (0, 1)]


def test_ratio_and_phase_shares_match_a_hand_computation() -> None:
    md = report(_rows(12.0), ["--report"], "runs.jsonl")
    summary, phases, protocol = tables(md)
    # under the protocol: IQM of 12 s over IQM of 10 s per 1,000 steps; no plan entry
    assert protocol[1:] == [
        ["ppo", "CPU", "2", "1.2 [1.2, 1.2]", "≤ 1.15: exploratory"],
        ["ppo", "wall", "2", "1.2 [1.2, 1.2]", "≤ 1.15: exploratory"],
    ]
    assert summary[1][1].startswith("1.2 ± 0 ") and summary[1][2].startswith("1.2 ± 0 ")
    assert summary[1][5] == "≤ 1.15: missed; at equal updates missed"
    share = {row[1]: row[4] for row in phases[1:]}
    # 2 s extra over a 10 s true run: 0.1 from the fit, 0.1 from the rollouts, 0 elsewhere
    assert share["reward fit"].startswith("0.1 ") and share["rollouts"].startswith("0.1 ")
    assert share["policy update"].startswith("0 ") and share["rest"].startswith("0 ")
    assert {row[2] for row in phases[1:] if row[1] == "policy update"} == {"8 ± 0 (n=2)"}


def test_a_ratio_under_the_target_is_met() -> None:
    summary = tables(report(_rows(11.0), ["--report"], "runs.jsonl"))[0]
    assert summary[1][1].startswith("1.1 ± 0 ")
    assert summary[1][5] == "≤ 1.15: met; at equal updates met"


def test_fewer_policy_updates_are_split_out_of_the_reward_learning_ratio() -> None:
    true = _run(10.0, 1000, policy_update=8.0, rollouts=2.0)
    mine = _run(11.6, 1000, policy_update=7.6, rollouts=2.0, reward_fit=2.0)
    rows = [{"arm": "sac", "seed": 0, "labels": 50, "true": true, "preflab": mine}] * 2
    summary = tables(report(rows, ["--report"], "runs.jsonl"))[0]
    # 11.6 / 10 overall; the fit alone adds 0.2; 0.4 s fewer policy-update CPU is −0.04
    assert [c.split(" ± ")[0] for c in summary[1][1:4]] == ["1.16", "1.2", "-0.04"]
    assert summary[1][5] == "≤ 1.15: missed; at equal updates missed"


def test_sbx_against_sb3_is_the_hand_computed_ratio_seed_by_seed() -> None:
    """Each seed's SBX runs take half the wall of its SB3 runs: every wall ratio is 0.5 with a
    degenerate interval; an unplanned invocation gets no verdict."""
    rows = []
    for seed in (0, 1, 2):
        slow = _run(10.0 + seed, 1000)
        fast = _run((10.0 + seed) / 2, 1000)
        for arm, run in (("sac", slow), ("sac_sbx", fast)):
            rows.append(
                {"arm": arm, "seed": seed, "labels": 100, "invocation": "i", "command": "c"}
                | {"true": run, "preflab": run}
            )
    md = report(rows, ["--report"], "runs.jsonl")
    section = md.split("## SBX's SAC against SB3's")[1]
    table = {row[0]: row[1:] for row in tables(section)[0][1:]}
    assert table["PrefLab wall per env step: SBX / SB3"] == [
        "0.5 [0.5, 0.5]",
        "below 1.0: exploratory",
    ]
    assert table["wall per env step: PrefLab on SBX / SB3, true reward"][0] == "0.5 [0.5, 0.5]"
    assert table["wall per env step: PrefLab on SBX / SBX, true reward"][0] == "1 [1, 1]"

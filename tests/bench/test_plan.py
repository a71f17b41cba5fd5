"""Pre-registration (preflab_bench._plan): parsing and validating plan files, looks along
``extends`` chains, and telling planned run-log rows from exploratory ones."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from preflab.errors import ConfigError
from preflab_bench._plan import check_row, load_plan, parse_plan

REPO_PLAN = Path(__file__).resolve().parents[2] / "benchmarks" / "plan.toml"


def entry(id: str, *, extends: str | None = None, **over: str) -> str:
    """The TOML of one [[experiment]] entry; ``over`` replaces keys (values are TOML text)."""
    keys = {
        "id": f'"{id}"',
        "bench": '"bpref"',
        "env": '"dm_control/walker-walk-v0"',
        "question": '"does it work?"',
        "arms": '["pebble", "sac_true_reward"]',
        "eval_seeds": "[10, 11, 12]",
        "tuning_seeds": "[0, 1, 2]",
        "budget": "{ env_steps = 100000, labels = 1000 }",
        "metric": '"IQM return"',
        "target": '{ value = 0.5, direction = "above", kind = "fraction_of_true_reward" }',
        "looks": "1",
        "committed": "2026-11-28",
    }
    if extends is not None:
        keys["extends"] = f'"{extends}"'
    keys.update(over)
    return "[[experiment]]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items()) + "\n"


def test_a_valid_plan_parses() -> None:
    plan = parse_plan(entry("a") + entry("b", eval_seeds="[20]", tuning_seeds="[]"))
    a = plan.entry("a")
    assert a.arms == ("pebble", "sac_true_reward")
    assert a.eval_seeds == (10, 11, 12) and a.tuning_seeds == (0, 1, 2)
    assert a.budget == {"env_steps": 100000, "labels": 1000}
    assert (a.target.value, a.target.direction, a.target.kind) == (
        0.5,
        "above",
        "fraction_of_true_reward",
    )
    assert a.committed == dt.date(2026, 11, 28)
    assert a.envs == ("dm_control/walker-walk-v0",)
    assert plan.looks("a") == 1 and plan.entry("b").tuning_seeds == ()


def test_overlapping_seeds_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ConfigError) as e:
        parse_plan(entry("a", eval_seeds="[0, 1, 10]", tuning_seeds="[0, 1, 2]"))
    msg = str(e.value)
    assert "'a'" in msg and "[0, 1]" in msg
    assert "both evaluation and tuning seeds" in msg and "disjoint" in msg


def test_looks_are_counted_along_the_extends_chain() -> None:
    text = (
        entry("a")
        + entry("a-2", extends="a", eval_seeds="[13, 14]")
        + entry("a-3", extends="a-2", eval_seeds="[15, 16]")
    )
    plan = parse_plan(text)
    assert plan.looks("a-3") == 3
    assert plan.looks("a-2") == 2 and plan.looks("a") == 1
    assert [e.id for e in plan.chain("a-3")] == ["a", "a-2", "a-3"]
    assert plan.head("a").id == "a-3"
    assert plan.seeds("a-3") == (10, 11, 12, 13, 14, 15, 16)


def test_per_env_looks_count_only_entries_that_added_seeds_for_the_env() -> None:
    text = entry("m", env='"X"', tuning_seeds="[]").replace(
        'env = "X"', 'envs = ["X", "Y"]'
    ).replace(
        "eval_seeds = [10, 11, 12]", "eval_seeds = [0, 1]\nenv_seeds = { X = [0, 1], Y = [0] }"
    ) + entry("m-2", extends="m", env='"Y"', eval_seeds="[1, 2]", tuning_seeds="[]")
    plan = parse_plan(text)
    assert plan.looks("m-2", "X") == 1 and plan.looks("m-2", "Y") == 2 and plan.looks("m-2") == 2
    assert plan.seeds("m-2", "X") == (0, 1) and plan.seeds("m-2", "Y") == (0, 1, 2)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (entry("a") + entry("a-2", extends="nope"), "extends no experiment 'nope'"),
        (entry("a") + entry("a-2", extends="a", eval_seeds="[12, 13]"), r"\[12\] .*already"),
        (
            entry("a") + entry("a-2", extends="a", eval_seeds="[0]", tuning_seeds="[]"),
            "disjoint along",
        ),
        (entry("a") + entry("a-2", extends="a", eval_seeds="[20]", arms='["x", "y"]'), "keeps its"),
        (entry("a", extends="b") + entry("b", extends="a", eval_seeds="[20]"), "cycle"),
        (entry("a") + entry("a"), "used twice"),
        (entry("a", colour='"red"'), r"unknown keys \['colour'\]"),
        (entry("a", looks="0"), "looks must be an integer ≥ 1"),
        (entry("a", committed='"yesterday"'), "ISO date"),
        (entry("a", target='{ value = 0.5, direction = "up", kind = "ratio" }'), "above"),
        (entry("a").replace('metric = "IQM return"\n', ""), "missing metric"),
        ("[[experiment]]\nid = ", "not valid TOML"),
        ("title = 'x'\n", "unknown top-level keys"),
    ],
)
def test_invalid_plans_are_refused(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_plan(text)


def test_check_row_tells_planned_from_exploratory() -> None:
    plan = parse_plan(entry("a"))
    ok = check_row({"plan": "a", "command": "preflab bench bpref --seeds 10", "seed": 10}, plan)
    assert ok.status == "planned" and ok.reasons == () and ok.entry == "a"
    no_command = check_row({"plan": "a", "seed": 10}, plan)
    assert no_command.status == "exploratory"
    assert any("command" in r for r in no_command.reasons)
    no_plan = check_row({"command": "preflab bench bpref"}, plan)
    assert no_plan.status == "exploratory" and no_plan.entry is None
    unknown = check_row({"plan": "zz", "command": "c"}, plan)
    assert unknown.status == "exploratory" and "not in the plan" in unknown.reasons[0]
    tuning = check_row({"plan": "a", "command": "c", "seed": 1}, plan)
    assert tuning.status == "exploratory" and "seed 1" in tuning.reasons[0]


def test_missing_plan_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no plan file"):
        load_plan(tmp_path / "plan.toml")


def test_the_committed_plan_is_valid_and_counts_the_mujoco_looks() -> None:
    plan = load_plan(REPO_PLAN)
    for id in ("bpref-walker-oracle", "bpref-cheetah-oracle", "bpref-button-press-oracle"):
        e = plan.entry(id)
        assert e.bench == "bpref" and plan.looks(id) == 1
        assert set(e.eval_seeds).isdisjoint(e.tuning_seeds)
    head = plan.head("mujoco-termination-restated")
    # 4 → 7 → 11 → 21 HalfCheetah seeds; 4 → 7 → 11 → 36 → 46 Walker2d; 5 → 8 Hopper
    assert plan.looks(head.id, "HalfCheetah-v5") == 4
    assert plan.looks(head.id, "Walker2d-v5") == 5
    assert plan.looks(head.id, "Hopper-v5") == 2
    assert plan.seeds(head.id, "HalfCheetah-v5") == tuple(range(21))
    assert plan.seeds(head.id, "Walker2d-v5") == tuple(range(46))
    assert plan.seeds(head.id, "Hopper-v5") == tuple(range(8))


BASE = entry("base", eval_seeds="[10, 11, 12]", tuning_seeds="[]")


def test_an_entry_takes_a_shared_arm_from_another_entry() -> None:
    plan = parse_plan(
        BASE + entry("mistake", tuning_seeds="[]", reuse='{ sac_true_reward = "base" }')
    )
    assert plan.entry("mistake").reuse == {"sac_true_reward": "base"}
    row = {"plan": "mistake", "command": "x", "seed": 10}
    assert check_row(row | {"arm": "pebble"}, plan).status == "planned"
    own = check_row(row | {"arm": "sac_true_reward"}, plan)  # that arm's runs are base's
    assert own.status == "exploratory" and "takes its 'sac_true_reward' runs from 'base'" in str(
        own.reasons
    )


@pytest.mark.parametrize(
    ("reuse", "over", "match"),
    [
        ('{ pebble = "base" }', {}, "the arm under test is always run"),
        ('{ sac_true_reward = "nope" }', {}, "no entry 'nope'|'nope'"),
        ('{ sac_true_reward = "base" }', {"eval_seeds": "[10, 13]"}, r"no 'sac_true_reward' runs for seeds \[13\]"),
        ('{ sac_true_reward = "base" }', {"bench": '"crowd_ppo"'}, "must be a 'crowd_ppo' entry"),
        ('"base"', {}, "reuse must be a table arm → entry id"),
    ],
)  # fmt: skip
def test_a_reuse_that_cannot_hold_is_refused(reuse: str, over: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_plan(BASE + entry("mistake", tuning_seeds="[]", reuse=reuse, **over))


def test_efficiency_takes_sac_on_the_true_reward_from_a_bpref_entry() -> None:
    """The one arm two benches run by the same function (SHARED_RUNS): an efficiency entry may
    reuse a B-Pref entry's SAC on the true reward, and no other arm of it."""
    eff = entry(
        "eff",
        bench='"efficiency"',
        arms='["plain", "all", "sac_true_reward"]',
        tuning_seeds="[]",
        reuse='{ sac_true_reward = "base" }',
    )
    assert parse_plan(BASE + eff).entry("eff").reuse == {"sac_true_reward": "base"}
    other = entry(
        "eff", bench='"efficiency"', arms='["all", "pebble"]', tuning_seeds="[]",
        reuse='{ pebble = "base" }',
    )  # fmt: skip
    with pytest.raises(ConfigError, match="must be a 'efficiency' entry"):
        parse_plan(BASE + other)


def test_a_reused_arm_is_not_reused_again() -> None:
    mistake = entry("mistake", tuning_seeds="[]", reuse='{ sac_true_reward = "base" }')
    equal = entry("equal", tuning_seeds="[]", reuse='{ sac_true_reward = "mistake" }')
    with pytest.raises(ConfigError, match="reusing 'sac_true_reward' too"):
        parse_plan(BASE + mistake + equal)


def test_a_voids_file_marks_entries_void_and_refuses_unknown_ids_or_empty_reasons(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(entry("a") + entry("b", eval_seeds="[20]", tuning_seeds="[]"))
    assert load_plan(plan).entry("a").void == ""
    voids = tmp_path / "plan_voids.toml"
    voids.write_text('[void]\na = "its teacher never fired"\n')
    assert load_plan(plan).entry("a").void == "its teacher never fired"
    assert load_plan(plan).entry("b").void == ""
    voids.write_text('[void]\nc = "no such entry"\n')
    with pytest.raises(ConfigError, match="no experiment 'c'"):
        load_plan(plan)
    voids.write_text('[void]\na = ""\n')
    with pytest.raises(ConfigError, match="needs the reason"):
        load_plan(plan)

"""When bench efficiency's report reads a plan entry, and what it reads: an entry on several envs
is read once, as a whole, with one verdict; an entry that reuses another's runs waits for that
entry; a run log with two rows for one run, a row at a budget the entry does not run, a failed
run or a row of another configuration holds the entry back; before it is read, the report lists
which runs exist and nothing of what they gave."""

from pathlib import Path

from preflab_bench.efficiency import report
from tests.bench.test_efficiency import _rows
from tests.bench.test_plan import entry

WALKER, CHEETAH = "dm_control/walker-walk-v0", "dm_control/cheetah-run-v0"


def _two_envs(tmp_path: Path) -> Path:
    """Plan entry "fr" (kind frontier, 0.9) on walker and cheetah: combo, plain and SAC at 50
    and 100 labels, seeds 0-2."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        entry(
            "fr",
            bench='"efficiency"',
            env=None,  # type: ignore[arg-type]
            envs=f'["{WALKER}", "{CHEETAH}"]',
            arms='["combo", "plain", "sac_true_reward"]',
            eval_seeds="[0, 1, 2]",
            tuning_seeds="[]",
            budget="{ env_steps = 1000, labels = [50, 100] }",
            target='{ value = 0.9, direction = "above", kind = "frontier" }',
        ).replace("env = None\n", "")
    )
    return plan


def _env_rows(env: str, combo: float, plain: float = 60.0) -> list[dict]:
    """One env's 15 runs of "fr": SAC 100, combo ``combo`` and plain ``plain`` at both budgets."""
    rows = _rows("sac_true_reward", 0, [100.0] * 3, plan="fr")
    for b in (50, 100):
        rows += _rows("combo", b, [combo] * 3, plan="fr") + _rows(
            "plain", b, [plain] * 3, plan="fr"
        )
    for r in rows:
        r["env"] = env
    return rows


def test_an_entry_on_two_envs_has_one_verdict_missed_when_one_env_misses(tmp_path: Path) -> None:
    plan = _two_envs(tmp_path)
    md = report(_env_rows(WALKER, 92.0) + _env_rows(CHEETAH, 85.0), plan)  # cheetah: 0.85 < 0.9
    assert md.count("**Verdict (fr,") == 1  # the entry's, after its last env; none per env
    assert "## `fr` · verdict\n\n**Verdict (fr, 1 look(s), 95.0% intervals): missed.**" in md
    assert f"{WALKER} every check met, {CHEETAH} a check missed" in md
    assert f"Checks on {CHEETAH} (fr's verdict, after its last env, needs every env)" in md
    assert "combo/SAC at 100 ≥ 0.9: 0.85 [0.85, 0.85] (missed)" in md
    md = report(_env_rows(WALKER, 92.0) + _env_rows(CHEETAH, 95.0), plan)
    assert "**Verdict (fr, 1 look(s), 95.0% intervals): met.**" in md


def test_an_env_whose_runs_all_exist_waits_for_the_entrys_other_env(tmp_path: Path) -> None:
    """Walker's 15 runs exist; cheetah has 14 (one failed run without a return) or none."""
    plan = _two_envs(tmp_path)
    cheetah = _env_rows(CHEETAH, 95.0)
    cheetah[-1]["return"] = None  # failed: not a run made
    for rows in (_env_rows(WALKER, 92.0), _env_rows(WALKER, 92.0) + cheetah):
        md = report(rows, plan)
        assert "plan entry `fr`: **waiting**, its runs on this env all exist" in md
        assert "waits for its runs on its other envs (1 missing)" in md or "(15 missing)" in md
        assert "Verdict" not in md and "Checks on" not in md and "IQM" not in md
        assert "92" not in md and "95" not in md  # no return of any run
    assert "missing: plain@100 2" in md  # cheetah's section names its failed run


def test_two_rows_for_one_run_or_a_row_at_another_budget_hold_the_entry_back(
    tmp_path: Path,
) -> None:
    plan = _two_envs(tmp_path)
    both = _env_rows(WALKER, 92.0) + _env_rows(CHEETAH, 95.0)
    again = {**both[3], "return": 0.0}  # walker's combo@50 seed 0 logged a second time
    md = report([*both, again], plan)
    assert "plan entry `fr`: **not read**, the run log holds two or more rows for combo@50 0" in md
    assert "Verdict" not in md and "IQM" not in md
    off = _rows("combo", 200, [99.0] * 3, plan="fr")  # 200 labels: not on fr's grid
    md = report(both + off, plan)
    assert "rows at budgets the entry does not run (combo@200 0, combo@200 1, combo@200 2)" in md
    assert "Verdict" not in md and "IQM" not in md  # cheetah waits for walker
    assert "plan entry `fr`: **waiting**, its runs on this env all exist" in md


def test_rows_of_another_teacher_or_combo_hold_the_entry_back(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        entry(
            "rob",
            bench='"efficiency"',
            arms='["combo@m", "combo"]',
            eval_seeds="[0, 1, 2]",
            tuning_seeds="[]",
            budget='{ env_steps = 1000, labels = [100], teacher = "bpref-mistake", '
            "teacher_epsilon = 0.3 }",
            target='{ value = 0.8, direction = "above", kind = "ratio" }',
        )
    )
    rows = _rows("combo", 100, [100.0] * 3, plan="rob", parts=["pretrain", "rime"])
    rows += _rows(
        "combo@m", 100, [90.0] * 3, plan="rob", parts=["pretrain", "rime"],
        teacher="bpref-mistake", teacher_epsilon=0.3,
    )  # fmt: skip
    for r in rows[:3]:  # the oracle arm of this entry, with its own teacher
        r.update(teacher="bpref-mistake", teacher_epsilon=0.3)
    assert "| combo@m / combo | 100 | 3 | 0.9 [0.9, 0.9] | met |" in report(rows, plan)
    rows[4]["teacher_epsilon"] = 0.1
    md = report(rows, plan)
    assert "**not read**" in md and "combo@m@100 1 ran with another teacher_epsilon than 0.3" in md
    rows[4]["teacher_epsilon"] = 0.3
    rows[0]["parts"] = ["pretrain"]
    md = report(rows, plan)
    assert "the combo rows name different parts: pretrain; pretrain rime" in md
    assert "met" not in md


def test_rime_over_pretrain_is_reported_beside_without_a_target(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        entry(
            "att",
            bench='"efficiency"',
            arms='["pretrain", "rime", "plain", "sac_true_reward"]',
            eval_seeds="[0, 1, 2]",
            tuning_seeds="[]",
            budget="{ env_steps = 1000, labels = [100] }",
            target='{ value = 1.0, direction = "above", kind = "ratio" }',
        )
    )
    rows = _rows("sac_true_reward", 0, [100.0] * 3, plan="att")
    rows += _rows("plain", 100, [50.0] * 3, plan="att") + _rows(
        "pretrain", 100, [60.0] * 3, plan="att"
    )
    rows += _rows("rime", 100, [66.0] * 3, plan="att")
    md = report(rows, plan)
    assert "| rime | 100 | 3 | 1.32 [1.32, 1.32] | met |" in md  # over plain, the target
    assert (
        "| rime / pretrain | 100 | 3 | 1.1 [1.1, 1.1] | beside, no target (RIME's own share" in md
    )

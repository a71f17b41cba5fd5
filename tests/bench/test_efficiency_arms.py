"""bench efficiency's arms of issue #59 (qpa, rime, SURF at its authors' settings, combo), the
97 % stop, the teacher's ε and tagged arms: asserted on each arm's TrainConfig, not by running."""

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from preflab.config import TrainConfig
from preflab.config.file import load_config
from preflab.errors import ConfigError
from preflab.presets import preset_path
from preflab_bench.efficiency import (
    PARTS,
    arm_config,
    curve_panels,
    main,
    parser,
    plot_curves,
    report,
    row_arm,
    wall_hours,
)
from tests.bench.test_efficiency import _rows
from tests.bench.test_plan import entry

ENV = "dm_control/walker-walk-v0"


def _args(*flags: str) -> Any:
    return parser().parse_args(["--unsup-steps", "900", *flags])


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            out |= _flat(v, f"{prefix}{f.name}.")
        else:
            out[f"{prefix}{f.name}"] = v
    return out


def _diff(a: TrainConfig, b: TrainConfig) -> dict[str, Any]:
    """The options where ``a`` differs from ``b``, with ``a``'s values."""
    fa, fb = _flat(a), _flat(b)
    return {k: v for k, v in fa.items() if fb[k] != v}


def _cfg(arm: str, *flags: str) -> TrainConfig:
    return arm_config(_args(*flags), ENV, arm, 100, 3)


def test_qpa_is_plain_with_qpas_three_parts_at_its_authors_settings() -> None:
    assert _diff(_cfg("qpa"), _cfg("plain")) == {
        "selector": "policy-aligned",
        "replay.hybrid": True,
        "fit.snippets.copies": 20,
    }  # N = 10 and ω = 0.5 are the config's defaults already
    assert _diff(_cfg("qpa", "--qpa-episodes", "7", "--qpa-recent-ratio", "0.25"), _cfg("qpa")) == {
        "aligned_episodes": 7,
        "replay.recent_episodes": 7,
        "replay.recent_ratio": 0.25,
    }


def test_rime_is_pretraining_with_rimes_fit_and_its_warm_start() -> None:
    """The warm start fits the pre-training's reward, so rime = pretrain + RIME; its steps are
    the authors' 5 per pre-training step unless given."""
    assert _diff(_cfg("rime"), _cfg("pretrain")) == {
        "fit.rime.on": True,
        "fit.rime.warm_start_steps": 4500,
    }
    assert _diff(_cfg("rime"), _cfg("plain")) == {
        "initial_steps": 1000,
        "unsup_steps": 900,
        "fit.rime.on": True,
        "fit.rime.warm_start_steps": 4500,
    }
    assert _cfg("rime", "--rime-warm-start-steps", "30").fit.rime.warm_start_steps == 30


def test_reed_is_plain_with_reeds_pretraining_at_its_flags() -> None:
    """REED (#59 item 4): the fit's pre-training on, at the authors' learning rate, optimiser,
    temperature and walker projection width; its step budget and batch are PrefLab's (the
    authors' 20 epochs do not fit this machine); every flag reaches the config."""
    assert _diff(_cfg("reed"), _cfg("plain")) == {"fit.reed.on": True}
    reed = _cfg("reed").fit.reed
    assert (reed.lr, reed.optimizer, reed.temperature, reed.projection) == (1e-3, "sgd", 0.5, 20)
    flags = ("--reed-steps", "50", "--reed-batch", "12", "--reed-lr", "0.01")
    flags += ("--reed-optimizer", "adam", "--reed-temperature", "0.1", "--reed-projection", "17")
    assert _diff(_cfg("reed", *flags), _cfg("reed")) == {
        "fit.reed.steps": 50,
        "fit.reed.batch_size": 12,
        "fit.reed.lr": 0.01,
        "fit.reed.optimizer": "adam",
        "fit.reed.temperature": 0.1,
        "fit.reed.projection": 17,
    }
    assert _diff(_cfg("combo", "--combo", "pretrain", "reed"), _cfg("pretrain")) == {
        "fit.reed.on": True
    }


def test_surf_runs_its_authors_walker_settings_the_presets_values() -> None:
    surf = _diff(_cfg("surf"), _cfg("plain"))
    assert surf == {
        "fit.semi_ratio": 4,
        "fit.semi_threshold": 0.99,
        "fit.crop": 5,
        "fit.epochs": 1000,
        "first_fit_epochs": 1000,
    }  # λ = 1 is the config's default
    preset = load_config(preset_path("surf/walker_walk"))
    for key, value in _flat(_cfg("surf")).items():
        if key in surf or key == "fit.semi_weight":
            assert _flat(preset)[key] == value, key


def test_the_code_default_surf_of_the_entries_before_59_stays_reachable() -> None:
    old = _cfg("surf", "--surf-ratio", "1", "--surf-threshold", "0.95", "--surf-epochs", "0")
    assert _diff(old, _cfg("plain")) == {"fit.semi_ratio": 1, "fit.crop": 5}  # τ 0.95: default


def test_a_combo_is_the_union_of_its_parts_in_any_order() -> None:
    plain = _cfg("plain")
    union: dict[str, Any] = {}
    for arm in ("pretrain", "surf", "qpa", "rime", "rune"):
        union |= _diff(_cfg(arm), plain)
    del union["fit.crop"]  # QPA's snippets are the one crop (the fit takes one)
    combo = _cfg("combo", "--combo", "rune", "rime", "qpa", "surf", "pretrain")
    assert _diff(combo, plain) == union
    assert _cfg("combo", "--combo", "pretrain", "surf", "rune") == _cfg("all")
    assert _cfg("combo", "--combo", "pretrain") == _cfg("pretrain")


@pytest.mark.parametrize(
    ("combo", "says"),
    [
        ([], "--combo pretrain surf qpa rime rune"),
        (["rime"], "add pretrain to --combo"),
        (["surf", "surf"], "distinct parts"),
    ],
)
def test_a_bad_combo_is_refused_saying_what_to_give(combo: list[str], says: str) -> None:
    args = _args(*(["--combo", *combo] if combo else []))
    with pytest.raises(ConfigError, match=says):
        arm_config(args, ENV, "combo", 100, 3)


def test_an_unknown_part_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--combo", "mrn"])
    assert set(PARTS) == {"pretrain", "surf", "qpa", "rime", "rune", "reed"}


def test_the_97_percent_stop_and_the_teachers_epsilon_reach_every_arm() -> None:
    flags = ("--stop-accuracy", "0.97", "--teacher", "bpref-mistake", "--teacher-epsilon", "0.3")
    flags += ("--combo", *PARTS)
    for arm in ("plain", "pretrain", "surf", "rune", "all", "qpa", "rime", "reed", "combo"):
        cfg = _cfg(arm, *flags)
        assert cfg.fit.stop_accuracy == 0.97
        assert cfg.teacher.epsilon == 0.3
        assert _diff(cfg, _cfg(arm, "--combo", *PARTS)).keys() <= {
            "fit.stop_accuracy",
            "teacher.epsilon",
        }
    assert _cfg("plain", "--teacher", "bpref-mistake").teacher.epsilon == 0.1  # B-Pref's own


def test_a_tagged_arm_is_logged_apart_and_read_over_its_own_arm(tmp_path: Path) -> None:
    """An entry of kind 'ratio' (0.8) holds combo under the oracle and combo@mistake30: the
    mistake teacher returns 90 against 100 on every seed, a ratio of 0.9, above 0.8."""
    assert row_arm(_args("--arm-tag", "mistake30"), "combo") == "combo@mistake30"
    assert row_arm(_args("--arm-tag", "mistake30"), "sac_true_reward") == "sac_true_reward"
    plan = tmp_path / "plan.toml"
    plan.write_text(
        entry(
            "rob",
            bench='"efficiency"',
            arms='["combo@mistake30", "combo"]',
            eval_seeds="[0, 1, 2]",
            tuning_seeds="[]",
            budget="{ env_steps = 1000, labels = [100] }",
            target='{ value = 0.8, direction = "above", kind = "ratio" }',
        )
    )
    rows = _rows("combo", 100, [100.0, 120.0, 80.0], plan="rob")
    rows += _rows("combo@mistake30", 100, [90.0, 108.0, 72.0], plan="rob")
    md = report(rows, plan)
    assert "| combo@mistake30 / combo | 100 | 3 | 0.9 [0.9, 0.9] | met |" in md


def _frontier_entry() -> str:
    """Plan entry "fr": best (combo), plain and SAC at 50 and 100 labels, target 0.9."""
    return entry(
        "fr",
        bench='"efficiency"',
        arms='["combo", "plain", "sac_true_reward"]',
        eval_seeds="[0, 1, 2]",
        tuning_seeds="[]",
        budget="{ env_steps = 1000, labels = [50, 100] }",
        target='{ value = 0.9, direction = "above", kind = "frontier" }',
    )


def _frontier(tmp_path: Path, best: float, plain: float) -> str:
    """A frontier entry (best, plain, SAC at 50 and 100 labels, 0.9): SAC returns 100 on every
    seed, best ``best`` and plain ``plain`` at both budgets on every seed."""
    plan = tmp_path / "plan.toml"
    plan.write_text(_frontier_entry())
    rows = _rows("sac_true_reward", 0, [100.0] * 3, plan="fr")
    for b in (50, 100):
        rows += _rows("combo", b, [best] * 3, plan="fr") + _rows("plain", b, [plain] * 3, plan="fr")
    return report(rows, plan)


def test_the_frontier_verdict_reads_each_of_issue_59s_bounds(tmp_path: Path) -> None:
    md = _frontier(tmp_path, 92.0, 60.0)
    assert "**Verdict (fr, 1 look(s), 95.0% intervals): met.**" in md
    assert "combo/SAC at 50 ≥ 0.66: 0.92 [0.92, 0.92] (met)" in md
    assert "combo/plain at 100, interval > 1: 1.533 [1.533, 1.533] (met)" in md
    md = _frontier(tmp_path, 85.0, 60.0)  # 0.85 < 0.9 at 100 labels
    assert (
        "intervals): missed.**" in md and "combo/SAC at 100 ≥ 0.9: 0.85 [0.85, 0.85] (missed)" in md
    )
    md = _frontier(tmp_path, 92.0, 95.0)  # best below plain
    assert "intervals): missed.**" in md
    assert "combo/plain at 50, interval > 1: 0.9684 [0.9684, 0.9684] (missed)" in md


def test_the_frontier_verdict_reads_intervals_where_issue_59_asks_for_them(
    tmp_path: Path,
) -> None:
    """SAC returns 100 on every seed. combo returns 70, 95 and 120 at 100 labels: its IQM ratio
    (the mean of three runs) is 0.95 ≥ 0.9, met by the point, but a resample of the three runs
    is (70, 70, 70) with chance 1/27 and at most 78.3 with chance 4/27, so the 2.5 % end lies
    at or below 0.783 < 0.8, and at the other end at or above 1.117: the interval contains 0.8
    and the whole-interval check, hence the verdict, is not shown. The same pattern over plain:
    combo 92 against plain 60, 80 and 100 is 1.15 by the point but its interval reaches 0.92."""
    plan = tmp_path / "plan.toml"
    plan.write_text(_frontier_entry())
    sac = _rows("sac_true_reward", 0, [100.0] * 3, plan="fr")
    rows = (
        sac + _rows("combo", 50, [92.0] * 3, plan="fr") + _rows("plain", 50, [60.0] * 3, plan="fr")
    )
    rows += _rows("combo", 100, [70.0, 95.0, 120.0], plan="fr")
    rows += _rows("plain", 100, [60.0] * 3, plan="fr")
    md = report(rows, plan)
    assert "**Verdict (fr, 1 look(s), 95.0% intervals): not shown.**" in md
    assert "combo/SAC at 100 ≥ 0.9: 0.95 [" in md and "] (met); combo/SAC at 100, interval" in md
    floor = md.split("combo/SAC at 100, interval > 0.8: 0.95 [", 1)[1].split("]", 1)
    lo, hi = (float(x) for x in floor[0].split(", "))
    assert 0.7 <= lo < 0.8 and 1.1 < hi <= 1.2 and floor[1].startswith(" (not shown)")
    assert "combo/plain at 100, interval > 1: 1.583 [" in md  # 95 / 60, lower end ≥ 70 / 60

    rows = sac + [
        r
        for b in (50, 100)
        for r in _rows("combo", b, [92.0] * 3, plan="fr")
        + _rows("plain", b, [60.0, 80.0, 100.0] if b == 50 else [60.0] * 3, plan="fr")
    ]
    md = report(rows, plan)
    assert "**Verdict (fr, 1 look(s), 95.0% intervals): not shown.**" in md
    plain = md.split("combo/plain at 50, interval > 1: 1.15 [", 1)[1].split("]", 1)
    lo, hi = (float(x) for x in plain[0].split(", "))
    assert 0.92 <= lo < 1.0 and 1.15 < hi <= 92 / 60 and plain[1].startswith(" (not shown)")


def test_wall_hours_per_entry_and_the_curve(tmp_path: Path) -> None:
    rows = _rows("plain", 50, [10.0, 20.0], plan="a") + _rows("plain", 100, [30.0, 40.0], plan="a")
    rows += _rows("sac_true_reward", 0, [50.0, 60.0])
    for r in rows:
        r["wall_s"] = 1800.0
    md = wall_hours(rows)
    assert "| a | 4 | 2.00 |" in md and "| (no plan entry) | 2 | 1.00 |" in md
    panels = curve_panels(rows, tmp_path / "no-plan.toml")  # no plan: no entry is incomplete
    env = rows[0]["env"]
    assert set(panels) == {(env, "a"), (env, "")}
    png = plot_curves(panels, tmp_path / "curve.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_curves({(env, ""): _rows("sac_true_reward", 0, [1.0])}, tmp_path / "n.png") is None


def test_no_curve_shows_an_entry_before_all_its_runs_exist(tmp_path: Path) -> None:
    """An entry is read once, when every run exists: until then its report lists the runs and
    the curve has no panel of it. A complete entry's panel holds the SAC runs it reuses."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        _frontier_entry()
        + entry(
            "fr2",
            bench='"efficiency"',
            arms='["plain", "sac_true_reward"]',
            eval_seeds="[0, 1, 2]",
            tuning_seeds="[]",
            reuse='{ sac_true_reward = "fr" }',
            budget="{ env_steps = 1000, labels = [50] }",
            target='{ value = 0.5, direction = "above", kind = "fraction_of_true_reward" }',
        )
    )
    sac = _rows("sac_true_reward", 0, [100.0] * 3, plan="fr")
    rows = sac + _rows("combo", 50, [92.0] * 3, plan="fr")  # no plain, no 100 labels yet
    rows += _rows("plain", 50, [70.0] * 3, plan="fr2")
    env = rows[0]["env"]
    # fr2's own runs all exist, but it reuses fr's SAC runs and fr is not complete: reading
    # them now would be an early look at fr, so fr2 waits too
    assert curve_panels(rows, plan) == {}
    md = report(rows, plan)
    assert "plan entry `fr2`: **waiting**" in md and "`fr`, whose runs it reuses (9 of" in md
    assert "IQM" not in md.split("## Wall hours")[0] and "| 70 |" not in md and "| 92 |" not in md
    for b in (50, 100):
        rows += _rows("plain", b, [60.0] * 3, plan="fr")
    rows += _rows("combo", 100, [92.0] * 3, plan="fr")
    assert set(curve_panels(rows, plan)) == {(env, "fr"), (env, "fr2")}
    assert curve_panels(rows, plan)[(env, "fr2")][-3:] == sac  # fr's SAC, drawn beside fr2's


def test_report_and_default_arms_need_no_combo_and_a_bad_combo_writes_nothing(
    tmp_path: Path,
) -> None:
    """--report runs nothing, so it needs no --combo; the default arms leave combo out; a combo
    without parts stops before any run or file."""
    assert "combo" not in parser().parse_args([]).arms
    log = tmp_path / "e.jsonl"
    log.write_text("")
    out = tmp_path / "e.md"
    assert main(["--report", "--jsonl", str(log), "--out", str(out)]) == 0 and out.is_file()
    with pytest.raises(ConfigError, match="--combo"):
        main(
            [
                "--arms",
                "combo",
                "--run-root",
                str(tmp_path / "runs"),
                "--jsonl",
                str(tmp_path / "x.jsonl"),
            ]
        )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "x.jsonl").exists()


def test_the_robustness_entry_reads_its_tagged_arm_over_the_frontiers_reused_runs(
    tmp_path: Path,
) -> None:
    """frontier-robust-walker's shape: combo@mistake30 run by the entry, combo (the oracle) reused
    from the frontier entry, which ran it at 50 and 100 labels; the 100-label ratio is 0.75, below
    0.8 on every seed."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        _frontier_entry()
        + entry(
            "rob",
            bench='"efficiency"',
            arms='["combo@mistake30", "combo"]',
            eval_seeds="[0, 1, 2]",
            tuning_seeds="[]",
            reuse='{ combo = "fr" }',
            budget="{ env_steps = 1000, labels = [100] }",
            target='{ value = 0.8, direction = "above", kind = "ratio" }',
        )
    )
    rows = _rows("combo", 50, [50.0] * 3, plan="fr") + _rows("combo", 100, [80.0] * 3, plan="fr")
    tagged = _rows("combo@mistake30", 100, [60.0] * 3, plan="rob")
    md = report(rows + tagged[:2], plan)
    assert "missing: combo@mistake30@100 2" in md
    # every run of rob exists, but fr (whose combo runs it reuses) has no plain or SAC yet
    md = report(rows + tagged, plan)
    assert "plan entry `rob`: **waiting**" in md and "IQM" not in md and "| 80 |" not in md
    rows += _rows("sac_true_reward", 0, [100.0] * 3, plan="fr")
    rows += _rows("plain", 50, [40.0] * 3, plan="fr") + _rows("plain", 100, [70.0] * 3, plan="fr")
    md = report(rows + tagged, plan)
    rob = md[md.index("plan entry `rob`") :]
    assert "| combo@mistake30 / combo | 100 | 3 | 0.75 [0.75, 0.75] | missed |" in rob
    assert "Wall hours of these 3 runs" in rob  # its own runs, not the reused ones

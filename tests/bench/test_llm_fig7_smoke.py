"""The LLM Fig. 7 benchmark end to end at a tiny budget: loop runs, JSON lines, --report."""

from __future__ import annotations

import json
import re
from collections import deque

import gymnasium as gym
import numpy as np
import pytest

from preflab.env_families.grids import DIR_VEC, LAYOUTS, decode_obs
from preflab.envs import make_env
from preflab.errors import ConfigError
from preflab.llm.progress import cost_to_go, progress
from preflab.store import FeedbackStore
from preflab_bench.llm_fig7 import (
    ExactPotential,
    fig7_config,
    main,
    optimal_reference,
    sigma_quality,
)
from tests.bench.test_smoke_all import check_run_logs, check_tables


def test_llm_fig7_bench_appends_runs_and_reports(tmp_path) -> None:
    runs, out = tmp_path / "runs.jsonl", tmp_path / "fig7.md"
    argv = [
        "--env", "PrefLab/NoLock-v0",
        "--accuracies", "0.8",
        "--queries", "3",
        "--seeds", "0",
        "--pairs", "60",
        "--steps", "256",
        "--eval-episodes", "2",
        "--runs", str(runs),
        "--out", str(out),
        "--run-root", str(tmp_path / "loops"),
    ]  # fmt: skip
    assert main(argv) == 0
    recs = [json.loads(line) for line in runs.read_text().splitlines()]
    assert [r["mode"] for r in recs] == ["default", "potential", "direct"]
    assert recs[0]["n_labels"] == 0
    assert all(r["n_labels"] == 60 and r["smoothing"] == 0.1 for r in recs[1:])
    assert all(0 <= r["success"] <= 1 for r in recs)
    assert all(0 <= r["sigma_sign_agreement"] <= 1 for r in recs[1:])
    lines = [ln for ln in out.read_text().splitlines() if ln.startswith("|")]
    # main table: header, rule, optimal, default, potential, direct; then the paired Δ table
    assert lines[0].count("|") == 11 and len(lines) == 6 + 3
    assert lines[2].startswith("| optimal policy |") and lines[3].startswith("| default")
    assert lines[4].startswith("| potential | 80% | 3 |")
    assert lines[5].startswith("| direct | 80% | 3 |")
    # the run went through the loop's store: 60 pair queries, 3 answers each
    run_dir = recs[1]["run_dir"]
    store = FeedbackStore(f"{run_dir}/feedback.db", array_dir=f"{run_dir}/segments")
    assert store.queries.count() == 60 and store.answers.count() == 180
    store.close()
    # --report alone rebuilds the same table from the recorded runs
    before = lines
    assert main(["--report", "--runs", str(runs), "--out", str(out)]) == 0
    assert [ln for ln in out.read_text().splitlines() if ln.startswith("|")] == before
    check_tables(out)
    check_run_logs(tmp_path, "llm_fig7")


def test_score_model_uses_every_pair_with_a_bounded_scale() -> None:
    cfg = fig7_config(
        "PrefLab/MultiLock-v0", "potential", 0, pairs=6000, steps=2048, eval_episodes=1
    )
    assert cfg.reward.members == 1
    assert cfg.fit.bootstrap is False and cfg.fit.holdout == 0.0  # nothing held out
    assert 0 < cfg.fit.label_smoothing < 0.5 and cfg.fit.random_answer == 0.0
    wide = fig7_config(
        "PrefLab/MultiLock-v0", "potential", 0, pairs=6000, steps=2048, eval_episodes=1, members=5
    )
    assert wide.reward.members == 5 and wide.fit == cfg.fit


def _shortest(env_id: str, seed: int) -> tuple[int, list[int]]:
    """The fewest actions to the goal from the layout ``reset(seed=seed)`` makes, by a
    breadth-first search over the whole state (cell, facing, key carried, doors open, keys on
    the floor) under the grid's rules, written here from its docstring and MiniGrid's: turns
    cost one action, forward moves into a free cell, the goal or an open door (not into a wall,
    a locked door or a key); interact picks up the key in front when the hands are empty, and
    unlocks (opens) the door in front with its own key, which is used up. With the path."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    g = env.unwrapped.grid_state()
    lay = LAYOUTS[g.layout]
    env.close()
    walls = {(x, y) for x in range(lay.width) for y in (0, lay.height - 1)}
    walls |= {(x, y) for x in (0, lay.width - 1, *lay.walls) for y in range(lay.height)}
    walls -= set(g.doors)
    start = (g.agent, g.direction, None, frozenset(), g.keys)
    parent: dict = {start: None}
    frontier = deque([start])
    while frontier:
        state = frontier.popleft()
        pos, d, held, opened, keys = state
        front = (pos[0] + DIR_VEC[d][0], pos[1] + DIR_VEC[d][1])
        for action in range(4):
            nxt = None
            if action in (0, 1):
                nxt = (pos, (d + (1 if action == 1 else -1)) % 4, held, opened, keys)
            elif action == 2:
                locked = any(front == c and i not in opened for i, c in enumerate(g.doors))
                if front not in walls and not locked and front not in keys:
                    if front == g.goal:  # the episode ends on arrival
                        path = [action]
                        while parent[state] is not None:
                            state, a = parent[state]
                            path.append(a)
                        return len(path), path[::-1]
                    nxt = (front, d, held, opened, keys)
            elif held is None and front in keys:
                i = keys.index(front)
                nxt = (pos, d, i, opened, (*keys[:i], None, *keys[i + 1 :]))
            elif held is not None and front == g.doors[held] and held not in opened:
                nxt = (pos, d, None, opened | {held}, keys)
            if nxt is not None and nxt not in parent:
                parent[nxt] = (state, action)
                frontier.append(nxt)
    raise AssertionError(f"no path to the goal in the layout of seed {seed}")


def test_optimal_reference_is_the_return_of_the_shortest_path() -> None:
    """The optimal return of an episode is the env's success reward after the fewest actions
    n*: 1 − 0.99·n*/n_max (n_max = 120 on MultiLock), averaged over the evaluation layouts."""
    env_id, n, seed = "PrefLab/MultiLock-v0", 5, 10_000
    expected = []
    for ep in range(n):
        steps, path = _shortest(env_id, seed + ep)
        # the path is one the env itself ends in success after exactly n* actions
        env = gym.make(env_id)
        env.reset(seed=seed + ep)
        for k, a in enumerate(path):
            _, reward, terminated, truncated, _ = env.step(a)
            assert terminated == (k == steps - 1) and not truncated
        env.close()
        assert reward == pytest.approx(1 - 0.99 * steps / 120)
        expected.append(1 - 0.99 * steps / 120)
    success, ret = optimal_reference(env_id, n, seed)
    assert success == 1.0
    assert ret == pytest.approx(float(np.mean(expected)), abs=1e-12)


def test_report_states_the_target_margin_paired_by_seed(tmp_path) -> None:
    runs, out = tmp_path / "runs.jsonl", tmp_path / "fig7.md"
    base = {"env": "PrefLab/NoLock-v0", "steps": 1000, "eval_episodes": 2, "return": 0.0}
    learned = {"pairs": 10, "smoothing": 0.1, "accuracy": 0.6, "queries": 10}
    recs = []
    for seed, (d, p) in enumerate([(0.5, 0.6), (0.5, 0.5), (1.0, 1.0)]):
        recs += [
            base | {"mode": "default", "accuracy": None, "queries": 0, "seed": seed, "success": d},
            base | learned | {"mode": "potential", "seed": seed, "success": p},
            base | learned | {"mode": "direct", "seed": seed, "success": 0.0},
        ]
    runs.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["--report", "--runs", str(runs), "--out", str(out)]) == 0
    row = next(ln for ln in out.read_text().splitlines() if ln.startswith("| 60% | 10 | 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "uniform, raw"  # the paper's pairs and inputs
    # potential − direct: 0.6, 0.5, 1.0 (mean 0.7, CI above 0)
    assert cells[4].startswith("0.7 ± ") and cells[5] == "above 0 (CI excludes 0)"
    # potential − 0.8 × default: 0.2, 0.1, 0.2 → mean 1/6, sd 1/√300, t(2) = 4.303
    assert cells[6] == "0.167 ± 0.14 (n=3)" and cells[7] == "above 0 (CI excludes 0)"
    # under the protocol, the same margin from IQMs (3 seeds: the IQM is the mean), no verdict
    protocol = [ln for ln in out.read_text().splitlines() if ln.startswith("| 60% | 10 | 1 |")][1]
    cells = [c.strip() for c in protocol.strip("|").split("|")]
    assert cells[4] == "3" and cells[5].startswith("0.7 [")
    assert cells[6].startswith("0.1667 [") and cells[7] == "exploratory (no plan entry)"


def test_report_keeps_sigma_ensembles_apart(tmp_path) -> None:
    runs, out = tmp_path / "runs.jsonl", tmp_path / "fig7.md"
    base = {"env": "PrefLab/NoLock-v0", "steps": 1000, "eval_episodes": 2, "return": 0.0}
    learned = {"pairs": 10, "smoothing": 0.1, "accuracy": 0.6, "queries": 10}
    recs = []
    for seed, default in enumerate((0.2, 0.8)):
        recs.append(base | {"mode": "default", "accuracy": None, "queries": 0, "seed": seed,
                            "success": default})  # fmt: skip
        # one-member runs (recorded before --members existed) on both seeds, 3-member on seed 0
        for mode, one, three in (("potential", 0.2, 0.6), ("direct", 0.0, 0.1)):
            recs.append(base | learned | {"mode": mode, "seed": seed, "success": one})
            if seed == 0:
                recs.append(
                    base | learned | {"mode": mode, "seed": 0, "success": three, "sigma_members": 3}
                )
    runs.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["--report", "--runs", str(runs), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    one = next(ln for ln in lines if ln.startswith("| potential | 60% | 10 | 0.2 "))
    three = next(
        ln for ln in lines if ln.startswith("| potential, σ = mean of 3 members | 60% | 10 | 0.6 ")
    )
    assert any(ln.startswith("| direct, σ = mean of 3 members | 60% | 10 | 0.1 ") for ln in lines)
    # success / default uses the default on the row's own seeds: 0.2 / mean(0.2, 0.8) for the
    # one-member rows, 0.6 / 0.2 for the 3-member rows (seed 0 only)
    assert one.split("|")[6].strip() == "40%" and three.split("|")[6].strip() == "300%"
    # each ensemble size has its own paired row: 3 members 0.6 − 0.1 = 0.5
    row = next(ln for ln in lines if ln.startswith("| 60% | 10 | 3 |"))
    assert [c.strip() for c in row.strip("|").split("|")][4].startswith("0.5")


def test_report_keeps_sigma_pair_and_input_options_apart(tmp_path) -> None:
    runs, out = tmp_path / "runs.jsonl", tmp_path / "fig7.md"
    base = {"env": "PrefLab/NoLock-v0", "steps": 1000, "eval_episodes": 2, "return": 0.0}
    learned = {"pairs": 10, "smoothing": 0.1, "accuracy": 0.6, "queries": 10, "sigma_members": 5}
    options = {"at_target": 0.4, "sigma_abs_inputs": True}
    recs = []
    for seed in (0, 1):
        recs.append(base | {"mode": "default", "accuracy": None, "queries": 0, "seed": seed,
                            "success": 0.5})  # fmt: skip
        recs.append(base | learned | {"mode": "potential", "seed": seed, "success": 0.2})
        recs.append(base | learned | options | {"mode": "potential", "seed": seed, "success": 0.9})
        recs.append(base | learned | options | {"mode": "direct", "seed": seed, "success": 0.1})
    runs.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["--report", "--runs", str(runs), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    name = "potential, σ = mean of 5 members, 40% of pairs at a target (privileged), abs(x) inputs"
    assert any(ln.startswith(f"| {name} | 60% | 10 | 0.9 ") for ln in lines)
    assert any(
        ln.startswith("| potential, σ = mean of 5 members | 60% | 10 | 0.2 ") for ln in lines
    )
    # only the set-up with direct runs has a paired row: 0.9 − 0.1 = 0.8; 0.9 − 0.8·0.5 = 0.5
    row, protocol = [ln for ln in lines if ln.startswith("| 60% | 10 | 5 |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "40% at a target (privileged), abs(x) appended"
    assert cells[4].startswith("0.8") and cells[6].startswith("0.5")
    # under the protocol: exploratory, and the privileged pairs said so
    assert protocol.endswith("| exploratory (no plan entry; privileged σ pairs) |")


def test_exact_potential_telescopes_to_the_progress_made() -> None:
    env_id = "PrefLab/Lock-v0"
    env = ExactPotential(make_env(env_id), env_id)
    obs, _ = env.reset(seed=3)
    start = -cost_to_go(env.unwrapped.grid_state())
    rng = np.random.default_rng(0)
    total, t, done = 0.0, 0, False
    while not done:
        obs, r, term, trunc, _ = env.step(int(rng.integers(4)))
        total += r / 0.99**t  # undo γ_r^t: the undiscounted differences telescope
        t, done = t + 1, term or trunc
    end = -cost_to_go(decode_obs(obs, env_id))
    assert t > 1 and total == pytest.approx(end - start)


def test_oracle_mode_runs_and_reports_and_refuses_other_envs(tmp_path) -> None:
    runs, out = tmp_path / "runs.jsonl", tmp_path / "fig7.md"
    common = ["--seeds", "0", "--steps", "256", "--eval-episodes", "2"]
    argv = ["--env", "PrefLab/NoLock-v0", "--modes", "oracle", *common]
    assert main([*argv, "--runs", str(runs), "--out", str(out)]) == 0
    (rec,) = [json.loads(line) for line in runs.read_text().splitlines()]
    assert rec["mode"] == "oracle" and rec["n_labels"] == 0 and 0 <= rec["success"] <= 1
    assert "| potential of the exact progress (no σ) |" in out.read_text()
    with pytest.raises(ConfigError, match="grid world"):
        main(["--env", "CartPole-v1", "--modes", "oracle", *common, "--runs", str(runs)])


class _ProgressScore:
    """σ = sign · the exact progress: the analytic cases of sigma_quality."""

    def __init__(self, env_id: str, sign: float) -> None:
        self.env_id, self.sign = env_id, sign

    def predict(self, obs: np.ndarray, normalise: bool = False) -> np.ndarray:
        return self.sign * progress(obs, self.env_id)[None]


@pytest.mark.parametrize(("sign", "agree", "rho"), [(1.0, 1.0, 1.0), (-1.0, 0.0, -1.0)])
def test_sigma_quality_on_the_exact_progress(sign: float, agree: float, rho: float) -> None:
    env_id = "PrefLab/Lock-v0"
    got = sigma_quality(_ProgressScore(env_id, sign), env_id, 0, episodes=5)  # type: ignore[arg-type]
    assert got == pytest.approx((agree, rho))


_ENTRY = """
[[experiment]]
id = "f7-test"
bench = "llm_fig7"
env = "PrefLab/NoLock-v0"
question = "q"
arms = ["potential", "default"]
eval_seeds = [80, 81]
tuning_seeds = []
budget = { env_steps = 256, pairs = 60, members = 1, at_target = 0.0, tag = "t", accuracies = [0.6], queries = [3] }
metric = "m"
target = { kind = "ratio", value = 0.8, direction = "above" }
looks = 1
committed = 2026-12-06
"""


def test_a_run_under_plan_matches_its_entry_and_its_rows_name_it(tmp_path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(_ENTRY)
    runs = tmp_path / "runs.jsonl"
    argv = [
        "--plan", "f7-test", "--plan-file", str(plan), "--tag", "t",
        "--env", "PrefLab/NoLock-v0", "--accuracies", "0.6", "--queries", "3",
        "--members", "1", "--at-target", "0", "--pairs", "60", "--steps", "256",
        "--eval-episodes", "2", "--runs", str(runs), "--out", str(tmp_path / "f7.md"),
        "--run-root", str(tmp_path / "loops"),
    ]  # fmt: skip
    for change, says in (
        (["--seeds", "82"], "seeds [82] are not evaluation seeds"),
        (["--seeds", "80", "--accuracies", "0.9"], "has accuracies = [0.6]"),
        (["--seeds", "80", "--members", "5"], "has members = 1; this run asks 5"),
        (["--seeds", "80", "--abs-inputs"], "leave out --abs-inputs"),
    ):
        with pytest.raises(ConfigError, match=re.escape(says)):
            main([*argv, *change])
    assert not runs.exists()  # nothing ran
    assert main([*argv, "--seeds", "80", "--modes", "default", "potential"]) == 0
    recs = [json.loads(line) for line in runs.read_text().splitlines()]
    assert [r["mode"] for r in recs] == ["default", "potential"]
    assert all(r["plan"] == "f7-test" and r["tag"] == "t" and r["command"] for r in recs)

"""Reproduction of paper 000's simulation study (Table 1) at CPU size.

Three simulated decision makers (pairwise, groupwise, interactive; ``preflab.sources.deciders``)
make the same number of comparisons each (the paper's 400 by default), train a reward model
and a PPO policy through the core loop (``preflab.runs.train``), and are compared on the
label error rate of their answers and on the final true return, paired by seed.

Runs append one JSON line each to ``benchmarks/results/groupwise_runs.jsonl`` (a run already
in the file is not repeated, so long experiments are split into several invocations); the
report step (``--report``, or the end of every invocation) rebuilds
``benchmarks/results/groupwise.md`` from all the lines: the paper's Table 1, ours with 95%
CIs, the paired differences (interactive − pairwise, groupwise − pairwise) with 95% CIs, and
whether the reward model learned in each environment (held-out pair accuracy; an environment
where it does not is reported as dropped, not compared).

Run: ``preflab bench groupwise --envs GridWorld --seeds 0 1 2`` (``--quick`` for a smoke run;
``--report`` only rebuilds the markdown). ``--skips count`` (default) counts a skipped group
comparison toward the budget, ``--skips replace`` replaces it. Under a plan entry, ``--plan
ENTRY`` runs only the entry's envs, arms, seeds and reading into ``ENTRY_runs.jsonl`` and
``ENTRY.md`` (dashes as underscores); that report lists the runs made until every planned run
exists, then gives the entry's verdict per environment (``preflab_bench._groupwise_plan``);
``--steps`` is accepted there only at the entry's ``budget.ppo_steps``. ``--run-root DIR`` keeps
each run in its own directory with the loop's checkpoints, so a run stopped by a time limit or
kill -9 continues exactly when the same command runs again (docs/guide/groupwise-bench.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.registration import EnvCreator

from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import make_agent
from preflab.policy.algos import Algo
from preflab.policy.evaluate import evaluate_policy, reward_agreement
from preflab.policy.presets import preset
from preflab.policy.rollout import collect_segments
from preflab.records import Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.ensemble import RewardConfig
from preflab.reward.trainer import FitConfig
from preflab.rundir.reporting import append_jsonl, fmt_ci, md_table, mean_ci, read_jsonl
from preflab.rundir.reporting import paired_differences as differences
from preflab.rundir.reporting import verdict as ci_verdict
from preflab.runs import load_run, resume, train
from preflab.runstate.checkpointer import Checkpointer
from preflab.sources.deciders import DecisionConfig, DecisionMaker
from preflab_bench._groupwise_plan import (
    REFERENCE,
    SKIPS,
    entry_steps,
    incomplete_report,
    planned_entry,
    verdict_section,
)
from preflab_bench._plan import PLAN, add_plan_options, load_plan
from preflab_bench._report import RESULTS, command, header
from preflab_bench._resumable_learn import learn_resumably

DMS = ("pairwise", "groupwise", "interactive")
ARMS = (*DMS, REFERENCE)
GRID_ID = "PrefLab/GroupGrid-v0"


class GroupGridEnv(gym.Env):
    """An 8×8 grid: reach the goal corner. Dense reward 1 − manhattan/14 per step, 50 steps.

    Observation: agent (x, y) and goal (x, y), divided by 7; actions: 0 right, 1 down,
    2 left, 3 up. The start cell is random; the goal is (7, 7). Random policy ≈ 17, best ≈ 45.
    """

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(self, size: int = 8, horizon: int = 50) -> None:
        self.size, self.horizon = size, horizon
        self.observation_space = spaces.Box(0.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(4)
        self._pos = np.zeros(2, np.int64)
        self._goal = np.array([size - 1, size - 1])
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.concatenate([self._pos, self._goal]).astype(np.float32) / (self.size - 1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._pos = self.np_random.integers(0, self.size // 2, 2)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        move = ((1, 0), (0, 1), (-1, 0), (0, -1))[int(action)]
        self._pos = np.clip(self._pos + move, 0, self.size - 1)
        self._t += 1
        dist = np.abs(self._goal - self._pos).sum()
        reward = 1.0 - dist / (2 * (self.size - 1))
        return self._obs(), float(reward), False, self._t >= self.horizon, {}


if GRID_ID not in gym.registry:
    # gymnasium calls it with the spec's keyword arguments (none); its EnvCreator protocol
    # wants a callable taking any **kwargs
    gym.register(id=GRID_ID, entry_point=cast(EnvCreator, GroupGridEnv))


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """Budget of one environment."""

    env_id: str
    """Gymnasium id."""
    total_steps: int
    """Environment steps per run."""
    steps_per_round: int
    """Steps between feedback rounds."""
    comparisons: int = 400
    """Comparisons (queries) per run, the same for every decision maker (paper: 400)."""
    segment_length: int = 25
    """Steps per behaviour (the paper's released code uses fragments of 25 steps)."""
    pool: int = 150
    """Most recent segments the decision makers choose from."""
    algo: Algo = "ppo"
    """Policy learner."""
    agent_kwargs: str = "{}"
    """Extra SB3 arguments."""


SPECS: dict[str, EnvSpec] = {
    "GridWorld": EnvSpec(
        env_id=GRID_ID,
        total_steps=16_384,
        steps_per_round=2_048,
        agent_kwargs='{"n_steps": 1024, "gamma": 0.95}',
    ),
    "MountainCar": EnvSpec(
        env_id="MountainCarContinuous-v0",
        total_steps=16_384,
        steps_per_round=2_048,
        segment_length=50,
    ),
    "Reacher": EnvSpec(
        env_id="Reacher-v5",
        total_steps=32_768,
        steps_per_round=2_048,
        segment_length=50,
    ),
    "Hopper": EnvSpec(env_id="Hopper-v5", total_steps=32_768, steps_per_round=2_048),
    # the two MuJoCo envs of paper 000's Table 1 not run by default (not in DEFAULT_ENVS): Hopper's
    # budget, for entries that name them (their reward learning is unchecked at any budget here)
    "HalfCheetah": EnvSpec(env_id="HalfCheetah-v5", total_steps=32_768, steps_per_round=2_048),
    "Walker": EnvSpec(env_id="Walker2d-v5", total_steps=32_768, steps_per_round=2_048),
}

DEFAULT_ENVS = ("GridWorld", "MountainCar", "Reacher", "Hopper")
"""Environments run by default: those where the learned reward is clearly above chance at these
budgets (all four since the decision makers of issue #11; the report drops any that is not)."""

FLAG_BONUS = 100.0
"""MountainCarContinuous pays +100 on reaching the flag; a mean return below 1 means no run did."""

PAPER: dict[str, dict[str, tuple[float, float]]] = {
    "Hopper": {"pairwise": (1221, 471), "groupwise": (1754, 851), "interactive": (2053, 443)},
    "HalfCheetah": {
        "pairwise": (579, 195),
        "groupwise": (1372, 799),
        "interactive": (1269, 1583),
    },
    "Walker": {"pairwise": (92, 155), "groupwise": (118, 268), "interactive": (603, 642)},
    "Reacher": {"pairwise": (-280, 110), "groupwise": (-239, 78), "interactive": (-202, 49)},
    "MountainCar": {
        "pairwise": (18059, 389),
        "groupwise": (18363, 263),
        "interactive": (18259, 261),
    },
    "GridWorld": {"pairwise": (762, 85), "groupwise": (712, 23), "interactive": (770, 31)},
}
"""Paper 000, Table 1: final true return, mean and std over 5 policies, 400 comparisons."""

LEARNS_ACCURACY = 0.65
"""An environment is reported only when the mean held-out pair accuracy of its learned rewards
is at least this and the lower end of its 95% CI is above chance (0.5)."""


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What every run of one invocation shares besides the environment's budget."""

    noise_frac: float = 0.5
    """σ of the DM's perception noise ε (Eq. 1) as a share of the std of random-policy segment
    returns."""
    max_discordance: float = 0.25
    """Overlap rule: skip a group comparison when more of its cross pairs than this share are
    perceived against the decision."""
    overlap_rule: str = "border"
    """Overlap rule of the DMs (``DecisionConfig.overlap_rule``): 'border', the paper's released
    code (skip when more than half of a group is perceived beyond the midpoint of the two
    means), or 'discordance' (``max_discordance``)."""
    clean_groups: bool = True
    """The DM removes members perceived beyond the border before answering (released code)."""
    max_group_uses: int = 3
    """How many comparisons of one round may use the same group."""
    heldout_steps: int = 2_000
    """Random-policy steps (and as many final-policy steps) of the held-out segments on which
    the learned reward is scored."""
    eval_episodes: int = 10
    """Episodes of the final true-return evaluation."""
    skips_use_budget: bool = True
    """A skipped group comparison counts toward the comparison budget (the reading paper 000's
    label counts suggest); False: it is replaced by another comparison."""

    def __post_init__(self) -> None:
        if not self.noise_frac >= 0:
            raise ConfigError(f"noise_frac must be ≥ 0, got {self.noise_frac}")
        if self.heldout_steps < 1 or self.eval_episodes < 1:
            raise ConfigError("heldout_steps and eval_episodes must be ≥ 1")


def random_segments(spec: EnvSpec, seed: int, n_steps: int) -> list[Segment]:
    """Segments of uniformly random actions (a fixed set per environment and seed)."""
    venv = make_vec_env(spec.env_id, 1, seed=10_000 + seed)
    segs = collect_segments(
        venv, None, n_steps, spec.segment_length, np.random.default_rng(seed), env_id=spec.env_id
    )
    venv.close()
    return segs


def noise_scale(segs: Sequence[Segment]) -> float:
    """Std of true segment returns under random actions: the unit of the DM's noise."""
    return float(np.std([s.true_return for s in segs])) or 1.0


def run_key(r: dict[str, Any]) -> tuple[str, str, int, str]:
    """Identity of a run in the jsonl: environment, decision maker, seed and its budgets."""
    return (r["env"], r["dm"], int(r["seed"]), json.dumps(r["budget"], sort_keys=True))


def run_dir_name(name: str, arm: str, seed: int, spec: EnvSpec, settings: RunSettings) -> str:
    """The directory of a run under ``--run-root``: env, arm, seed and a digest of its budgets
    (a directory is only ever continued by the run it was started for)."""
    digest = hashlib.sha256(
        json.dumps(budget_of(spec, settings), sort_keys=True).encode()
    ).hexdigest()[:10]
    return f"{name}-{arm}-s{seed}-{digest}"


ROW_FILE = "row.json"
"""A finished run's record in its directory under ``--run-root``, written before it is appended
to the run log: a process stopped between the two gets its row back without running again."""


def run_one(
    name: str,
    spec: EnvSpec,
    dm_kind: str,
    seed: int,
    settings: RunSettings,
    workdir: Path,
    *,
    threads: int = 1,
    resumable: bool = False,
) -> dict[str, Any]:
    """One training run of one decision maker; returns its JSON record.

    ``resumable``: the run lives in ``workdir / run_dir_name(...)`` and continues exactly from
    its last checkpoint when that directory holds a stopped run (``preflab.runs.resume``; the
    decision maker's generator, counters and pending answers come back from the checkpoint
    with the loop's); a finished run is not run again (its record is read back). ``threads``:
    torch threads of the run (``TrainConfig.torch_threads``, which does not identify a run)."""
    run_dir = workdir / (
        run_dir_name(name, dm_kind, seed, spec, settings)
        if resumable
        else f"{name}-{dm_kind}-{seed}"
    )
    if resumable and (run_dir / ROW_FILE).is_file():
        kept: dict[str, Any] = json.loads((run_dir / ROW_FILE).read_text())
        return kept
    heldout = random_segments(spec, seed, settings.heldout_steps)
    sigma = settings.noise_frac * noise_scale(heldout)
    cfg = TrainConfig(
        env_id=spec.env_id,
        algo=spec.algo,
        seed=seed,
        total_steps=spec.total_steps,
        total_labels=spec.comparisons,
        initial_label_frac=0.25,
        initial_steps=spec.steps_per_round,
        steps_per_round=spec.steps_per_round,
        schedule="hyperbolic",
        segment_length=spec.segment_length,
        pool_size=spec.pool,
        agent_kwargs=spec.agent_kwargs,
        reward=RewardConfig(members=3, hidden=(64, 64)),
        fit=FitConfig(epochs=10),
        first_fit_epochs=30,
        eval_episodes=settings.eval_episodes,
        torch_threads=threads,
    )
    dm = DecisionMaker(
        dm_kind,
        DecisionConfig(
            noise_std=sigma,
            max_discordance=settings.max_discordance,
            overlap_rule="border" if settings.overlap_rule == "border" else "discordance",
            clean_groups=settings.clean_groups,
        ),
        rng=np.random.default_rng(1_000 + seed),
        max_group_uses=settings.max_group_uses,
        skips_use_budget=settings.skips_use_budget,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    if resumable and (run_dir / "summary.json").is_file():  # ended before its row was kept
        res = load_run(run_dir)
        dm.load_state(Checkpointer(run_dir).load().state["source"])
    elif resumable and (run_dir / "config.json").is_file():  # refuses a run configured otherwise
        res = resume(run_dir, config=cfg, source=dm, selector=dm)
    else:
        res = train(cfg, run_dir=run_dir, source=dm, selector=dm)
    wall = res.wall_s if resumable else time.perf_counter() - t0
    venv = make_vec_env(spec.env_id, 1, seed=20_000 + seed)
    on_policy = collect_segments(
        venv,
        res.agent,
        settings.heldout_steps,
        spec.segment_length,
        np.random.default_rng(seed),
        env_id=spec.env_id,
    )
    venv.close()
    test = heldout + on_policy
    acc, corr = reward_agreement(
        res.reward_model,
        SegmentBatch.from_segments(test),
        np.array([s.true_return for s in test]),
        np.random.default_rng(seed),
    )
    row = {
        "env": name,
        "dm": dm_kind,
        "seed": seed,
        "budget": budget_of(spec, settings),
        "noise_std": sigma,
        "true_return": res.true_return,
        "n_labels": res.n_labels,
        "heldout_accuracy": acc,
        "heldout_corr": corr,
        "pool_accuracy": res.reward_accuracy,
        "wall_s": wall,
        "cpu_s": time.process_time() - c0,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        **{f"dm_{k}": v for k, v in dm.stats.as_dict().items()},
    }
    if resumable:
        row["run_dir"] = str(run_dir)
        (run_dir / ROW_FILE).write_text(json.dumps(row))
    return row


def run_reference(
    name: str,
    spec: EnvSpec,
    seed: int,
    settings: RunSettings,
    run_root: Path | None = None,
) -> dict[str, Any]:
    """PPO on the true reward with the run's steps, seed and hyperparameters (no labels).

    With ``run_root``: trained in checkpointed chunks in ``run_root / run_dir_name(...)``
    (``preflab_bench._resumable_learn``), so a stopped run continues exactly; a finished one
    is read back from its record there."""
    if run_root is not None:
        return _reference_resumable(name, spec, seed, settings, run_root)
    cfg = TrainConfig(
        env_id=spec.env_id,
        algo=spec.algo,
        seed=seed,
        total_steps=spec.total_steps,
        steps_per_round=spec.steps_per_round,
        agent_kwargs=spec.agent_kwargs,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    venv = make_vec_env(spec.env_id, cfg.n_envs, seed=seed)
    hyper = preset(cfg.algo, cfg.n_envs, cfg.steps_per_round, overrides=cfg.agent_overrides())
    agent = make_agent(cfg.algo, venv, seed=seed, net_arch=list(cfg.net_arch), **hyper)
    agent.learn(total_timesteps=spec.total_steps, progress_bar=False)
    mean, _std = evaluate_policy(
        agent, spec.env_id, n_episodes=settings.eval_episodes, seed=10_000 + seed
    )
    venv.close()
    return {
        "env": name,
        "dm": REFERENCE,
        "seed": seed,
        "budget": budget_of(spec, settings),
        "true_return": mean,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


REFERENCE_CHUNK_ROUNDS = 8
"""Rounds (``EnvSpec.steps_per_round``) of the reference arm between its checkpoints."""


def _reference_resumable(
    name: str, spec: EnvSpec, seed: int, settings: RunSettings, run_root: Path
) -> dict[str, Any]:
    run_dir = run_root / run_dir_name(name, REFERENCE, seed, spec, settings)
    if (run_dir / ROW_FILE).is_file():
        kept: dict[str, Any] = json.loads((run_dir / ROW_FILE).read_text())
        return kept
    cfg = TrainConfig(
        env_id=spec.env_id,
        algo=spec.algo,
        seed=seed,
        total_steps=spec.total_steps,
        steps_per_round=spec.steps_per_round,
        agent_kwargs=spec.agent_kwargs,
    )
    c0 = time.process_time()
    venv = make_vec_env(spec.env_id, cfg.n_envs, seed=seed)
    hyper = preset(cfg.algo, cfg.n_envs, cfg.steps_per_round, overrides=cfg.agent_overrides())
    agent = make_agent(cfg.algo, venv, seed=seed, net_arch=list(cfg.net_arch), **hyper)
    wall = learn_resumably(
        agent,
        venv,
        run_dir,
        spec.total_steps,
        chunk_steps=REFERENCE_CHUNK_ROUNDS * spec.steps_per_round,
    )
    mean, _std = evaluate_policy(
        agent, spec.env_id, n_episodes=settings.eval_episodes, seed=10_000 + seed
    )
    venv.close()
    row = {
        "env": name,
        "dm": REFERENCE,
        "seed": seed,
        "budget": budget_of(spec, settings),
        "true_return": mean,
        "wall_s": wall,
        "cpu_s": time.process_time() - c0,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "run_dir": str(run_dir),
    }
    (run_dir / ROW_FILE).write_text(json.dumps(row))
    return row


def budget_of(spec: EnvSpec, settings: RunSettings) -> dict[str, Any]:
    """The budgets that identify a run (with its environment, arm and seed)."""
    return asdict(spec) | {k: v for k, v in asdict(settings).items() if k != "heldout_steps"}


# ----- jsonl ---------------------------------------------------------------------------------
def load_runs(path: Path) -> list[dict[str, Any]]:
    """Every run record of a jsonl file (the last record wins for a repeated key)."""
    if not path.exists():
        return []
    return list({run_key(r): r for r in read_jsonl(path)}.values())


# ----- analysis ------------------------------------------------------------------------------
def paired_differences(
    rows: Sequence[dict[str, Any]], env: str, a: str, b: str, field: str
) -> list[float]:
    """Per seed: ``field`` of decision maker a minus that of b (seeds both ran)."""
    va = {r["seed"]: float(r[field]) for r in rows if r["env"] == env and r["dm"] == a}
    vb = {r["seed"]: float(r[field]) for r in rows if r["env"] == env and r["dm"] == b}
    return differences(va, vb)


def reward_learns(
    rows: Sequence[dict[str, Any]], env: str, threshold: float = LEARNS_ACCURACY
) -> tuple[bool, float, float]:
    """(learns, mean, CI half-width) of the held-out pair accuracy over the env's runs: the
    mean is at least ``threshold`` and (for a threshold above chance) the CI is above 0.5."""
    acc = [r["heldout_accuracy"] for r in rows if r["env"] == env and r["dm"] in DMS]
    m, h = mean_ci(acc)
    low = m - h if math.isfinite(h) else m
    return bool(m >= threshold and (threshold <= 0.5 or low > 0.5)), m, h


def verdict(values: Sequence[float], better: int) -> str:
    """Whether the paired differences show the paper's direction (better = +1 higher is
    better, −1 lower is better): 'shown' when the 95% CI excludes 0 on that side."""
    shown, opposite = "shown (paper's direction)", "opposite (CI excludes 0)"
    if better > 0:
        return ci_verdict(values, above=shown, below=opposite)
    return ci_verdict(values, above=opposite, below=shown)


def _ci(values: Sequence[float], scale: float = 1.0, nd: int = 1) -> str:
    return fmt_ci([scale * v for v in values], nd, n="single", empty="–")


def overlap_text(budget: dict[str, Any]) -> str:
    """The overlap and editing rules of a run's decision makers, in words."""
    if budget.get("overlap_rule", "discordance") == "border":
        text = (
            "as in the paper's released code, the border is the midpoint of the two groups' "
            "perceived mean returns, a group comparison is skipped when more than half of "
            "either group is perceived beyond it"
        )
    else:
        text = (
            "a group comparison is skipped when more than "
            f"{budget.get('max_discordance', 0):.0%} of its cross pairs are perceived against "
            "the decision"
        )
    if budget.get("clean_groups"):
        text += (
            ", and the members perceived beyond the border are removed before answering "
            "(the user's edit in the released code)"
        )
    return text + "."


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table, or a sentence when there is nothing to put in it."""
    no_rows = "No rows: no environment where the reward learned, or no paired seeds.\n"
    return md_table(head, rows, empty=no_rows)


def _no_flag_note(rows: Sequence[dict[str, Any]], kept: list[str]) -> list[str]:
    """A note when no MountainCar run (reference included) reached the flag: its returns are
    then the action cost alone and cannot order the decision makers."""
    if "MountainCar" not in kept:
        return []
    rets = [r["true_return"] for r in rows if r["env"] == "MountainCar"]
    if not rets or max(rets) >= 1.0:
        return []
    steps = SPECS["MountainCar"].total_steps
    return [
        f"MountainCar: no run reached the flag within {steps:,} PPO steps, not even on the true "
        f"reward (best return {max(rets):.2f}; reaching it pays +{FLAG_BONUS:g}), so its returns "
        "are the action cost alone and cannot order the decision makers; its label-error and "
        "held-out-accuracy rows stand.",
        "",
    ]


def _protocol_section(
    rows: Sequence[dict[str, Any]], kept: Sequence[str], *, planned: bool = False
) -> list[str]:
    """Final return under the reporting protocol: per env, each decision maker's IQM over seeds
    and the group decision makers' IQM differences from PAIRWISE-DM (final return, label error),
    paired by seed, with 95% stratified bootstrap intervals. Without a plan entry (``planned``
    False) the runs are exploratory and get no verdict; with one, the entry's verdict is
    :func:`verdict_section`'s and these intervals describe the runs beside it."""
    from preflab_bench._protocol import difference_ci, fmt_interval, iqm_ci

    table = []
    for e in kept:
        by = {d: {r["seed"]: r for r in rows if r["env"] == e and r["dm"] == d} for d in ARMS}
        scores = {d: np.array([[r["true_return"]] for r in by[d].values()]) for d in ARMS if by[d]}
        iqm = {d: fmt_interval(a.iqm) for d, a in iqm_ci(scores).items()}
        for a, b in (("interactive", "pairwise"), ("groupwise", "pairwise")):
            seeds = sorted(by[a].keys() & by[b].keys())
            if len(seeds) < 2:
                continue
            cells = []
            for key, scale in (("true_return", 1.0), ("dm_label_error_rate", 100.0)):
                x, y = (np.array([[scale * by[d][s][key]] for s in seeds]) for d in (a, b))
                cells.append(fmt_interval(difference_ci(x, y, paired=True), 3))
            table.append([e, iqm.get(a, "–"), iqm.get(b, "–"), f"{a} − {b}", len(seeds), *cells])
    if not table:
        return []
    return [
        "## Under the reporting protocol" + ("" if planned else " (exploratory)"),
        "",
        "IQM over seeds with 95% stratified bootstrap intervals; differences of IQMs paired by "
        "seed. "
        + (
            "The plan entry's verdict is the section above; these intervals describe the runs."
            if planned
            else "These runs were not pre-registered (no plan entry): no verdict."
        ),
        "",
        _table(
            [
                "Environment",
                "IQM return (first DM)",
                "IQM return (PAIRWISE-DM)",
                "difference",
                "seeds",
                "IQM return difference",
                "IQM label-error difference (pp)",
            ],
            table,
        ),
        "",
    ]


def report(
    rows: Sequence[dict[str, Any]],
    argv: Sequence[str],
    runs_path: Path,
    threshold: float = LEARNS_ACCURACY,
    plan_path: Path = PLAN,
) -> str:
    """The markdown of all runs (see the module doc); for the runs of a plan entry with
    planned runs missing, the list of runs made only."""
    if (runs_only := incomplete_report(rows, plan_path)) is not None:
        title = "Groupwise comparison: paper 000, Table 1, at CPU size"
        return header(title, "groupwise", list(argv), "see the plan entry") + runs_only
    envs = [e for e in SPECS if any(r["env"] == e for r in rows)]
    budgets = []
    for env in envs:
        b = next(r["budget"] for r in rows if r["env"] == env)
        budgets.append(
            f"{env}: {b['env_id']}, PPO {b['total_steps']} env steps, {b['comparisons']} "
            f"comparisons per decision maker, segments of {b['segment_length']} steps, rounds "
            f"of {b['steps_per_round']} steps, pool of {b['pool']} recent segments"
        )
    b0 = rows[0]["budget"] if rows else {}
    seeds = sorted({r["seed"] for r in rows})
    cmds = sorted({(r.get("command", ""), r.get("note", "")) for r in rows if r.get("command")})
    wall_min = sum(r["wall_s"] for r in rows) / 60
    cpu_min = sum(r.get("cpu_s", r["wall_s"]) for r in rows) / 60
    threads = ", ".join(str(t) for t in sorted({int(r.get("threads", 1)) for r in rows}))
    out = [
        header(
            "Groupwise comparison: paper 000, Table 1, at CPU size",
            "groupwise",
            list(argv),
            "; ".join(budgets)
            + f". Seeds {seeds}; summed run time {wall_min:.1f} min wall, {cpu_min:.1f} min CPU "
            f"(one process, torch threads {threads}).",
        ),
        "Runs were made by (each appends to `"
        + runs_path.name
        + "`; a run already there is not repeated):\n\n"
        + "\n".join(f"- `{c}`" + (f" ({note})" if note else "") for c, note in cmds)
        + "\n",
        "Supersedes the earlier result (`groupwise.md`, `groupwise_part{A,B}.md` and their "
        "`_runs.json` at commit 2f3be02: 40 comparisons, 8–10k PPO steps, 2 seeds, skips "
        "consuming the budget, percentages of near-zero means); they are in git history.",
        "",
        "Set-up as in the paper (§5): three simulated decision makers, the same number of "
        "comparisons each; PAIRWISE-DM asks the pair of highest ensemble variance, GROUPWISE-DM "
        "the pair of DTW-tree groups (≤ 8 members) of highest s_g, INTERACTIVE-DM builds "
        "return-homogeneous groups (≤ 8 members) from the tree and spreads its comparisons over "
        "the range of true returns. Answers follow Eq. 1 with Gaussian ε per behaviour, "
        f"σ = {b0.get('noise_frac')} × the std of random-policy segment returns; "
        + overlap_text(b0)
        + (
            " A skipped comparison counts toward the budget (the paper's label counts suggest "
            "it does); a group may "
            if b0.get("skips_use_budget", False)
            else " A skipped comparison is replaced (it does not consume the budget); a group may "
        )
        + f"be used in up to {b0.get('max_group_uses')} comparisons of a round. "
        "Reward ensemble 3 × (64, 64), PPO. Reward learning is checked on held-out segments "
        "(random-policy and final-policy segments never labelled): the share of random pairs "
        "the learned reward orders like the true reward (chance 0.5). Label error: share of "
        "labels whose preferred behaviour has the lower true return.",
        "",
        "What is scaled down: PPO runs for "
        + ", ".join(
            f"{e} {next(r['budget']['total_steps'] for r in rows if r['env'] == e)}" for e in envs
        )
        + " env steps, not the paper's millions, so returns are early-training returns and "
        "are not on the paper's scale (our GridWorld is a small 8 × 8 grid, not the paper's). "
        "Comparisons per decision maker: "
        + ", ".join(
            f"{e} {next(r['budget']['comparisons'] for r in rows if r['env'] == e)}" for e in envs
        )
        + " (paper: 400).",
        "",
    ]
    learn = {e: reward_learns(rows, e, threshold) for e in envs}
    out += [
        "## Does the reward model learn? (held-out pair accuracy, mean ± 95% CI)",
        "",
        "Held-out segments: random-policy and final-policy segments, never labelled; chance "
        f"is 0.5. An environment is reported when the accuracy over all its runs is ≥ "
        f"{threshold} with a CI above 0.5; a decision maker whose own accuracy stays below "
        "that is named under the table.",
        "",
        _table(
            ["Environment", "all runs", *(f"{d}" for d in DMS), "correlation", "reported"],
            [
                [
                    e,
                    _ci(
                        [r["heldout_accuracy"] for r in rows if r["env"] == e and r["dm"] in DMS],
                        nd=3,
                    ),
                    *(
                        _ci(
                            [r["heldout_accuracy"] for r in rows if r["env"] == e and r["dm"] == d],
                            nd=3,
                        )
                        for d in DMS
                    ),
                    _ci(
                        [r["heldout_corr"] for r in rows if r["env"] == e and r["dm"] in DMS], nd=3
                    ),
                    "yes" if learn[e][0] else f"no: dropped (needs ≥ {threshold} and CI above 0.5)",
                ]
                for e in envs
            ],
        ),
    ]
    weak = [
        f"{d} in {e} ({_ci(acc, nd=3)})"
        for e in envs
        if learn[e][0]
        for d in DMS
        if (acc := [r["heldout_accuracy"] for r in rows if r["env"] == e and r["dm"] == d])
        and not (mean_ci(acc)[0] >= threshold)
    ]
    if weak:
        out += [
            "Decision makers whose own learned reward stays below the threshold (their return "
            "differences compare a learned reward with one near chance): " + "; ".join(weak) + ".",
            "",
        ]
    kept = [e for e in envs if learn[e][0]]
    out += [
        "## Table 1: final true return (paper: mean ± std over 5; ours: mean ± 95% CI)",
        "",
        _table(
            ["Environment"] + [f"paper {d}" for d in DMS] + [f"ours {d}" for d in ARMS],
            [
                [e]
                + [f"{PAPER[e][d][0]:g} ± {PAPER[e][d][1]:g}" if e in PAPER else "–" for d in DMS]
                + [
                    _ci([r["true_return"] for r in rows if r["env"] == e and r["dm"] == d])
                    for d in ARMS
                ]
                for e in kept
            ],
        ),
        "`ours true-reward`: the same PPO (steps, seed, hyperparameters) trained on the "
        "environment's own reward, unnormalised, whereas the learned reward reaches the "
        "policy normalised to zero mean and unit std: a reference for what the step budget "
        "allows, not an upper bound.",
        "",
        *_no_flag_note(rows, kept),
        "## Labels: comparisons, skips, labels, label error rate (mean ± 95% CI over seeds)",
        "",
        "Paper (over all environments): 400 comparisons each; labels 400 (pairwise), 690 "
        '(interactive), 1209 (groupwise); a "slight decrease in errors" for the group '
        "decision makers (no number given).",
        "",
        _table(
            [
                "Environment",
                "DM",
                "comparisons",
                "skipped",
                "labels",
                "label error %",
                "held-out acc",
            ],
            [
                [
                    e,
                    d,
                    _ci([r["dm_comparisons"] for r in rs], nd=0),
                    _ci([r["dm_skipped"] for r in rs], nd=0),
                    _ci([r["dm_labels"] for r in rs], nd=0),
                    _ci([r["dm_label_error_rate"] for r in rs], scale=100),
                    _ci([r["heldout_accuracy"] for r in rs], nd=3),
                ]
                for e in kept
                for d in DMS
                if (rs := [r for r in rows if r["env"] == e and r["dm"] == d])
            ],
        ),
    ]
    diff_rows = []
    for e in kept:
        for a, b in (("interactive", "pairwise"), ("groupwise", "pairwise")):
            err = paired_differences(rows, e, a, b, "dm_label_error_rate")
            ret = paired_differences(rows, e, a, b, "true_return")
            if not err:
                continue
            paper = f"{PAPER[e][a][0] - PAPER[e][b][0]:+g}" if e in PAPER else "–"
            diff_rows.append(
                [
                    e,
                    f"{a} − {b}",
                    len(err),
                    _ci(err, scale=100),
                    verdict(err, -1),
                    _ci(ret, nd=2),
                    verdict(ret, +1),
                    paper,
                ]
            )
    out += [
        "## Paired differences at equal comparisons (per seed, mean ± 95% CI)",
        "",
        "The paper's direction: lower label error and higher final return for the group "
        "decision makers (INTERACTIVE-DM above PAIRWISE-DM in every environment of Table 1).",
        "",
        _table(
            [
                "Environment",
                "difference",
                "seeds",
                "label error (pp)",
                "error verdict",
                "final return",
                "return verdict",
                "paper Δ return",
            ],
            diff_rows,
        ),
    ]
    verdicts = verdict_section(rows, kept, plan_path)
    out += verdicts + _protocol_section(rows, kept, planned=bool(verdicts))
    dropped = [e for e in envs if e not in kept]
    if dropped:
        out += [
            "Dropped (reward at chance, see the first table): " + ", ".join(dropped) + ".",
            "",
        ]
    out += [
        "## Runs",
        "",
        _table(
            [
                "env",
                "dm",
                "seed",
                "return",
                "comparisons",
                "skipped",
                "labels",
                "err %",
                "held-out acc",
                "corr",
                "wall s",
                "CPU s",
            ],
            [
                [
                    r["env"],
                    r["dm"],
                    r["seed"],
                    f"{r['true_return']:.2f}",
                    *(
                        [
                            r["dm_comparisons"],
                            r["dm_skipped"],
                            r["dm_labels"],
                            f"{100 * r['dm_label_error_rate']:.1f}",
                            f"{r['heldout_accuracy']:.3f}",
                            f"{r['heldout_corr']:.3f}",
                        ]
                        if r["dm"] in DMS
                        else ["–"] * 6
                    ),
                    f"{r['wall_s']:.0f}",
                    f"{r.get('cpu_s', float('nan')):.0f}",
                ]
                for r in sorted(rows, key=lambda r: (r["env"], r["seed"], ARMS.index(r["dm"])))
            ],
        ),
    ]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench groupwise", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS), choices=list(SPECS))
    ap.add_argument(
        "--dms",
        nargs="+",
        default=list(ARMS),
        choices=list(ARMS),
        help=f"decision makers, and {REFERENCE!r}: PPO on the true reward (reference)",
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="override PPO env steps per run")
    ap.add_argument("--comparisons", type=int, default=None, help="override comparisons")
    ap.add_argument("--noise-frac", type=float, default=RunSettings.noise_frac)
    ap.add_argument("--max-discordance", type=float, default=RunSettings.max_discordance)
    ap.add_argument(
        "--overlap-rule", choices=("border", "discordance"), default=RunSettings.overlap_rule
    )
    ap.add_argument(
        "--no-clean", action="store_true", help="the DM answers about the unedited groups"
    )
    ap.add_argument("--quick", action="store_true", help="tiny budgets (smoke test)")
    ap.add_argument("--report", action="store_true", help="only rebuild the markdown")
    ap.add_argument(
        "--learns-accuracy",
        type=float,
        default=LEARNS_ACCURACY,
        help="held-out pair accuracy an environment needs to be reported",
    )
    ap.add_argument(
        "--skips",
        choices=list(SKIPS),
        default="count",
        help="a skipped group comparison counts toward the comparison budget, or is replaced",
    )
    add_plan_options(
        ap,
        "a plan entry of this bench (benchmarks/plan.toml): its runs and report are "
        "OUT/<entry>_runs.jsonl and OUT/<entry>.md",
    )
    ap.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of each run")
    ap.add_argument(
        "--run-root",
        type=Path,
        default=None,
        help="keep each run in a directory here (env-arm-seed-digest of its budgets) with its "
        "checkpoints: the same command again continues a stopped run exactly, and a finished "
        "one is not run again (default: a temporary folder, no resume)",
    )
    ap.add_argument(
        "--runs", type=Path, default=None, help="jsonl of runs (default OUT/groupwise_runs.jsonl)"
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    name = "groupwise"
    planned_steps: dict[str, int] = {}
    if args.plan:
        given = {"--comparisons": args.comparisons is not None,
                 "--noise-frac": args.noise_frac != RunSettings.noise_frac,
                 "--max-discordance": args.max_discordance != RunSettings.max_discordance,
                 "--overlap-rule": args.overlap_rule != RunSettings.overlap_rule,
                 "--no-clean": args.no_clean, "--quick": args.quick, "--runs": args.runs}  # fmt: skip
        planned_entry(
            args.plan_file,
            args.plan,
            envs=args.envs,
            dms=args.dms,
            seeds=args.seeds,
            skips=args.skips,
            overrides=[k for k, v in given.items() if v],
            steps=args.steps,
        )
        planned_steps = entry_steps(load_plan(args.plan_file).entry(args.plan))
        name = args.plan.replace("-", "_")
    runs_path = args.runs or args.out / f"{name}_runs.jsonl"
    settings = RunSettings(
        noise_frac=args.noise_frac,
        max_discordance=args.max_discordance,
        overlap_rule=args.overlap_rule,
        clean_groups=not args.no_clean,
        skips_use_budget=SKIPS[args.skips],
    )
    specs = dict(SPECS)
    if args.quick:
        specs = {
            k: replace(
                s,
                total_steps=3_072,
                steps_per_round=1_024,
                comparisons=12,
                pool=40,
            )
            for k, s in specs.items()
        }
        settings = replace(settings, heldout_steps=200, eval_episodes=1)
    if args.steps is not None:
        specs = {k: replace(s, total_steps=args.steps) for k, s in specs.items()}
    specs |= {k: replace(specs[k], total_steps=v) for k, v in planned_steps.items() if k in specs}
    if args.comparisons is not None:
        specs = {k: replace(s, comparisons=args.comparisons) for k, s in specs.items()}
    if not args.report:
        done = {run_key(r) for r in load_runs(runs_path)}
        cmd = command("groupwise", argv)
        if args.run_root is not None:
            args.run_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="preflab-groupwise-") as tmp:
            root = args.run_root or Path(tmp)
            for env in args.envs:
                for seed in args.seeds:
                    for dm in args.dms:
                        probe = {
                            "env": env,
                            "dm": dm,
                            "seed": seed,
                            "budget": budget_of(specs[env], settings),
                        }
                        if run_key(probe) in done:
                            print(f"{env} {dm} seed {seed}: already in {runs_path}", flush=True)
                            continue
                        if dm == REFERENCE:
                            r = run_reference(env, specs[env], seed, settings, args.run_root)
                            r["command"] = cmd
                            r["plan"] = args.plan or None
                            r["threads"] = args.threads
                            append_jsonl(runs_path, r)
                            print(
                                f"{env:12s} {dm:12s} seed {seed}: return "
                                f"{r['true_return']:8.2f}  {r['wall_s']:.0f}s",
                                flush=True,
                            )
                            continue
                        r = run_one(
                            env,
                            specs[env],
                            dm,
                            seed,
                            settings,
                            root,
                            threads=args.threads,
                            resumable=args.run_root is not None,
                        )
                        r["command"] = cmd
                        r["plan"] = args.plan or None
                        r["threads"] = args.threads
                        append_jsonl(runs_path, r)
                        print(
                            f"{env:12s} {dm:12s} seed {seed}: return {r['true_return']:8.2f}  "
                            f"comparisons {r['dm_comparisons']:4d}  labels {r['dm_labels']:4d}  "
                            f"err {100 * r['dm_label_error_rate']:5.1f}%  "
                            f"skipped {r['dm_skipped']:3d}  acc {r['heldout_accuracy']:.3f}  "
                            f"{r['wall_s']:.0f}s",
                            flush=True,
                        )
    rows = load_runs(runs_path)
    if not rows:
        raise ConfigError(f"no runs in {runs_path}; run without --report first")
    md = report(rows, argv, runs_path, args.learns_accuracy, args.plan_file)
    out = args.out / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = [
    "ARMS",
    "DMS",
    "PAPER",
    "REFERENCE",
    "SPECS",
    "EnvSpec",
    "GroupGridEnv",
    "RunSettings",
    "load_runs",
    "main",
    "paired_differences",
    "report",
    "reward_learns",
    "verdict",
]

"""Crowd-PrefRL Fig. 4/5: finding a minority viewpoint in a crowd on MO-Hopper.

A PPO agent trains on mo-gymnasium's ``mo-hopper-v5`` with the average of its forward and
jump-height rewards (the paper's "linearized reward"). At each checkpoint (25k and 100k
steps) we roll out 100 trajectories, sample 100 trajectory pairs and let a crowd of 150
simulated users answer (110 judge by forward velocity, 40 by jump height; γ ∈ [0.98, 1],
β ∈ [0.1, 10], ε ∈ [0, 0.2]). SML weights of all 150 users → 1-D Gaussian mixtures with
k = 1..4, k by BIC → groups; each group is then aggregated by SML on its own and its labels
are scored against that group's own ground truth.

Writes benchmarks/results/crowd_fig5.md, crowd_fig5.png and crowd_fig5_runs.jsonl (the run log:
one row per checkpoint with what the table shows and the per-group label errors, with its
command).
Run: ``preflab bench crowd_fig5`` (``--quick`` for a smoke run). Under a plan entry,
``preflab bench crowd_fig5 --plan crowd-fig5-viewpoints --seed S`` runs one of its evaluation
seeds (each once, at the entry's budgets) and rebuilds the entry's report,
``crowd_fig5_viewpoints.md``: its runs only until every seed exists, then the IQM share of users
in their own group with its stratified bootstrap interval and the verdict.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import time
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import mo_gymnasium  # noqa: F401  (registers mo-hopper-v5)
import numpy as np
import torch
from matplotlib.figure import Figure
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

from preflab.aggregate import find_viewpoints, majority, sml
from preflab.crowd import CrowdConfig, answer_pairs, error_rates, sample_users, truth_labels
from preflab.errors import ConfigError
from preflab.rundir.reporting import append_jsonl, md_table, read_jsonl
from preflab.seeding import derive_seed
from preflab_bench._crowd_common import random_pairs
from preflab_bench._plan import add_plan_options, load_plan
from preflab_bench._protocol import fmt_interval, iqm_ci, verdict
from preflab_bench._report import RESULTS, header, log_and_report, log_row, write_report
from preflab_bench.bpref import envs_under_plan, section_title

log = logging.getLogger(__name__)


class AverageReward(gym.Wrapper):
    """Scalar reward = mean of mo-hopper's forward and height rewards; keeps the vector in info."""

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, term, trunc, info = self.env.step(action)
        vec = cast(np.ndarray, reward)  # mo-gymnasium: a vector, typed as a SupportsFloat
        info["vec_reward"] = np.asarray(vec, np.float64)
        return obs, float(0.5 * (vec[0] + vec[1])), term, trunc, info


def make_mo_hopper() -> gym.Env:
    return AverageReward(gym.make("mo-hopper-v5"))


def rollouts(agent: PPO, n: int, seed: int) -> list[np.ndarray]:
    """n trajectories of the stochastic policy: per-step (forward, height) rewards, (T, 2)."""
    env = make_mo_hopper()
    out = []
    for k in range(n):
        obs, _ = env.reset(seed=seed + k)
        rows, done = [], False
        while not done:
            act, _ = agent.predict(obs, deterministic=False)
            obs, _r, term, trunc, info = env.step(act)
            rows.append(info["vec_reward"][:2])
            done = term or trunc
        out.append(np.array(rows))
    env.close()
    return out


def front_pad(trajs: list[np.ndarray], idx: np.ndarray, obj: int, h: int) -> np.ndarray:
    """(len(idx), h) rewards of objective ``obj``, zero-padded at the front so that
    Σ_t γ^(h−1−t) r_t equals each trajectory's own Σ_t γ^(H−1−t) r_t."""
    out = np.zeros((len(idx), h))
    for row, i in enumerate(idx):
        r = trajs[i][:, obj]
        out[row, h - len(r) :] = r
    return out


def assignment_accuracy(assign: np.ndarray, truth: np.ndarray) -> float:
    """Share of users in the right group under the best matching of found to true groups."""
    best = 0.0
    groups = np.unique(assign)
    for perm in itertools.permutations(range(max(2, len(groups))), len(groups)):
        mapped = np.array([perm[g] for g in assign])
        best = max(best, float((mapped == truth).mean()))
    return best


def checkpoint_study(
    trajs: list[np.ndarray],
    rng: np.random.Generator,
    n_pairs: int,
    n_users: int,
    n_minority: int,
    return_scale: float,
) -> dict[str, Any]:
    pairs = random_pairs(len(trajs), n_pairs, rng)
    h = max(len(t) for t in trajs)
    ra = {g: front_pad(trajs, pairs[:, 0], g, h) for g in (0, 1)}
    rb = {g: front_pad(trajs, pairs[:, 1], g, h) for g in (0, 1)}
    users = sample_users(CrowdConfig(n_users=n_users, n_minority=n_minority), rng)
    votes = answer_pairs(users, ra, rb, rng, return_scale=return_scale)
    truth = {g: truth_labels(ra[g], rb[g]) for g in (0, 1)}
    groups = np.array([u.group for u in users])
    err_own = np.where(groups == 0, error_rates(votes, truth[0]), error_rates(votes, truth[1]))
    res = sml(votes, diagonal="auto")  # paper 003's v̂ on these dense crowds
    vp = find_viewpoints(res.weights, max_groups=4)
    out: dict[str, Any] = {
        "weights": res.weights,
        "groups": groups,
        "err_own": err_own,
        "vp": vp,
        "assign_acc": assignment_accuracy(vp.assignment, groups),
        "ret_corr": float(
            np.corrcoef([t[:, 0].sum() for t in trajs], [t[:, 1].sum() for t in trajs])[0, 1]
        ),
        "disagree": float((truth[0] != truth[1]).mean()),
        "maj_all_err": float((majority(votes) != truth[0]).mean()),
        "sml_all_err": float((res.labels != truth[0]).mean()),
        "group_err": [],
        "mean_len": float(np.mean([len(t) for t in trajs])),
    }
    for g in range(vp.n_groups):
        members = vp.members(g)
        labels = (
            sml(votes[members], diagonal="auto").labels
            if members.size >= 3
            else majority(votes[members])
        )
        true_group = int(np.round(groups[members].mean()))  # the objective most members judge by
        out["group_err"].append(
            (g, members.size, true_group, float((labels != truth[true_group]).mean()))
        )
    return out


def _log(args: argparse.Namespace, ck: int, r: dict[str, Any]) -> dict[str, Any]:
    """The run-log row of one checkpoint: the table's numbers, unrounded."""
    vp, groups, err = r["vp"], r["groups"], r["err_own"]
    return log_row(
        "crowd_fig5",
        args,
        "mo-hopper-v5",
        "viewpoints",
        args.seed,
        ppo_steps=ck,
        trajectories=args.trajectories,
        pairs=args.pairs,
        users=args.users,
        minority=args.minority,
        return_scale=args.return_scale,
        mean_length=r["mean_len"],
        return_corr=r["ret_corr"],
        disagree=r["disagree"],
        user_error_majority=float(np.median(err[groups == 0])),
        user_error_minority=float(np.median(err[groups == 1])),
        n_groups=int(vp.n_groups),
        bic=[float(b) for b in vp.bic],
        assigned=r["assign_acc"],
        majority_error=r["maj_all_err"],
        sml_error=r["sml_all_err"],
        group_errors=[
            {
                "group": g,
                "users": int(n),
                "objective": "forward" if tg == 0 else "height",
                "label_error": e,
            }
            for g, n, tg, e in r["group_err"]
        ],
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """This bench's command line (``--smoke`` and ``--quick`` set small budgets)."""
    p = argparse.ArgumentParser(
        prog="preflab bench crowd_fig5", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--checkpoints", type=int, nargs="+", default=[25_000, 100_000], help="PPO steps"
    )
    p.add_argument("--trajectories", type=int, default=100)
    p.add_argument("--pairs", type=int, default=100)
    p.add_argument("--users", type=int, default=150)
    p.add_argument("--minority", type=int, default=40)
    p.add_argument(
        "--return-scale", type=float, default=1.0, help="returns divided by this before β"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS, help="directory for the tables and figures")
    add_plan_options(
        p,
        "a plan entry of this bench (benchmarks/plan.toml): the run's rows name it and the "
        "entry's report, OUT/<entry>.md, is rebuilt instead of crowd_fig5.md",
    )
    p.add_argument("--jsonl", type=Path, default=None, help="run log (OUT/crowd_fig5_runs.jsonl)")
    p.add_argument("--report", action="store_true", help="with --plan: rebuild its report only")
    p.add_argument("--smoke", action="store_true", help="smallest budgets (the test suite)")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.checkpoints, args.trajectories = [2048, 4096], 20
    if args.smoke:
        args.checkpoints, args.trajectories, args.pairs = [256], 10, 40
    args.jsonl = args.jsonl or args.out / "crowd_fig5_runs.jsonl"
    args.argv = argv
    if args.report and not args.plan:
        raise ConfigError("--report rebuilds a plan entry's report: name it with --plan ENTRY")
    return args


SMOKE_PPO: dict[str, Any] = {"n_steps": 256}
"""PPO's rollout under ``--smoke`` (checkpoint 256): one rollout of the checkpoint's 256 steps.
SB3's default rollout of 2,048 steps, which every other budget keeps, would collect eight times
the checkpoint's steps before the first checkpoint."""


def smoke_ppo(args: argparse.Namespace) -> dict[str, Any]:
    """Keywords of the PPO agent: :data:`SMOKE_PPO` under ``--smoke``, else SB3's defaults."""
    return dict(SMOKE_PPO) if getattr(args, "smoke", False) else {}


def study(args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    """Train PPO to each checkpoint and run :func:`checkpoint_study` there."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    venv = make_vec_env(make_mo_hopper, n_envs=1, seed=derive_seed(rng), vec_env_cls=DummyVecEnv)
    agent = PPO(
        "MlpPolicy", venv, seed=derive_seed(rng), verbose=0, device="cpu", **smoke_ppo(args)
    )
    done_steps = 0
    results = {}
    for ck in sorted(args.checkpoints):
        agent.learn(ck - done_steps, reset_num_timesteps=False)
        done_steps = ck
        trajs = rollouts(agent, args.trajectories, seed=10_000 + ck)
        results[ck] = checkpoint_study(
            trajs, rng, args.pairs, args.users, args.minority, args.return_scale
        )
        log.info("checkpoint %d done (%.0f s)", ck, time.time() - t0)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO)
    if args.plan:
        return planned(args)
    args.plan = ""
    t0 = time.time()
    results = study(args)
    for ck, r in results.items():
        append_jsonl(args.jsonl, _log(args, ck, r))
    rows, grows = [], []
    for ck, r in results.items():
        vp = r["vp"]
        rows.append(
            [
                ck,
                f"{r['mean_len']:.0f}",
                f"{r['ret_corr']:.2f}",
                f"{r['disagree']:.0%}",
                f"{np.median(r['err_own'][r['groups'] == 0]):.3f}",
                f"{np.median(r['err_own'][r['groups'] == 1]):.3f}",
                vp.n_groups,
                " / ".join(f"{b:.1f}" for b in vp.bic),
                f"{r['assign_acc']:.1%}",
                f"{r['maj_all_err']:.3f}",
                f"{r['sml_all_err']:.3f}",
            ]
        )
        for g, size, tg, err in r["group_err"]:
            grows.append(
                [
                    ck,
                    g,
                    size,
                    "forward (majority)" if tg == 0 else "height (minority)",
                    f"{err:.3f}",
                ]
            )
    budgets = (
        f"PPO (SB3 defaults) on mo-hopper-v5 with reward (forward + height)/2, checkpoints "
        f"{args.checkpoints}; {args.trajectories} stochastic-policy trajectories and {args.pairs} "
        f"random trajectory pairs per checkpoint; {args.users} users ({args.users - args.minority} "
        f"forward / {args.minority} height), return_scale={args.return_scale}, seed={args.seed}"
    )
    text = header(
        "Crowd-PrefRL Fig. 5 — minority viewpoint on MO-Hopper",
        "preflab_bench.crowd_fig5",
        argv,
        budgets,
    )
    text += md_table(
        [
            "PPO steps",
            "mean traj. length",
            "corr(forward, height) returns",
            "pairs where objectives disagree",
            "median user error (majority, own truth)",
            "median user error (minority, own truth)",
            "groups by BIC",
            "BIC k=1..4",
            "users assigned correctly",
            "MAJ error (all, vs forward)",
            "SML error (all, vs forward)",
        ],
        rows,
    )
    text += (
        "\nPer-group SML labels (groups found by the mixture), scored against the objective "
        "most of the group's members judge by:\n\n"
    )
    text += md_table(["PPO steps", "group", "users", "objective", "label error"], grows)
    text += (
        "\nTarget: 2 groups and ≥ 95% of users assigned correctly while the agent does not yet "
        f"satisfy both objectives. Wall time {time.time() - t0:.0f} s.\n\n![fig5](crowd_fig5.png)\n"
    )
    fig = Figure(figsize=(13, 3.5 * len(results)))  # outside pyplot, as crowd_fig2
    axes = fig.subplots(len(results), 3, squeeze=False)
    for row, (ck, r) in zip(axes, results.items(), strict=True):
        w, g = r["weights"], r["groups"]
        row[0].hist(
            [w[g == 0], w[g == 1]],
            bins=30,
            stacked=True,
            color=["tab:blue", "tab:orange"],
            label=["majority (forward)", "minority (height)"],
        )
        row[0].set_title(f"{ck} steps: SML weights")
        row[0].legend(fontsize=8)
        row[1].plot(np.arange(1, 5), r["vp"].bic, "o-")
        row[1].set_title("BIC vs number of groups")
        row[2].scatter(w, r["err_own"], c=np.where(g == 0, "tab:blue", "tab:orange"), s=10)
        row[2].set_xlabel("SML weight")
        row[2].set_ylabel("error vs own objective")
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "crowd_fig5.png", dpi=100)
    write_report(text, args.out / "crowd_fig5.md")
    return 0


def planned(args: argparse.Namespace) -> int:
    """A run of a plan entry (or, with ``--report``, its report only): the entry must be this
    bench's, the seed one of its evaluation seeds not run yet, the budgets the entry's."""
    entry = load_plan(args.plan_file).entry(args.plan)
    if entry.bench != "crowd_fig5":
        raise ConfigError(f"plan entry {entry.id!r} is for preflab bench {entry.bench}")
    if not args.report:
        given = {
            "ppo_steps": sorted(args.checkpoints),
            "trajectories": args.trajectories,
            "pairs": args.pairs,
            "users": args.users,
            "minority": args.minority,
            "return_scale": args.return_scale,
        }
        differ = {k: (v, entry.budget[k]) for k, v in given.items() if entry.budget.get(k) != v}
        if differ:
            raise ConfigError(
                f"{entry.id!r} is registered with other budgets (given, planned): {differ}; "
                "run it with the bench's defaults"
            )
        if args.seed not in entry.eval_seeds:
            raise ConfigError(
                f"seed {args.seed} is not an evaluation seed of {entry.id!r} "
                f"({list(entry.eval_seeds)})"
            )
        done = read_jsonl(args.jsonl) if args.jsonl.exists() else []
        if any(r.get("plan") == entry.id and r.get("seed") == args.seed for r in done):
            raise ConfigError(
                f"{args.jsonl} already holds seed {args.seed} of {entry.id!r}; each planned run "
                "is made once (--report rebuilds the report)"
            )
    args.out = args.out / f"{entry.id.replace('-', '_')}.md"
    return log_and_report(
        args,
        bench="crowd_fig5",
        title="Crowd-PrefRL Fig. 5 over seeds — minority viewpoint on MO-Hopper",
        budgets=f"as plan entry `{entry.id}` registers them: {dict(entry.budget)}",
        runs=lambda: (_log(args, ck, r) for ck, r in study(args).items()),
        report=plan_report,
    )


def plan_report(rows: list[dict[str, Any]], plan_path: Path) -> str:
    """Per plan entry the rows name: its status and, while planned runs are missing, the runs
    made (no result: the entry is read once); once every planned run exists, the IQM share of
    users in their own group at the first checkpoint with its stratified bootstrap interval,
    the verdict and one line per seed and checkpoint."""
    out = []
    for _env, env_rows, status in envs_under_plan(rows, plan_path):
        out.append(f"## {section_title(_env, env_rows)}\n\n{status.line}\n")
        if status.incomplete:
            runs = sorted(env_rows, key=lambda r: (r["seed"], r["ppo_steps"]))
            out.append(
                md_table(
                    ["seed", "PPO steps", "time", "command"],
                    [[r["seed"], r["ppo_steps"], r["time"], f"`{r['command']}`"] for r in runs],
                )
            )
            continue
        first = min(r["ppo_steps"] for r in env_rows)
        at_first = {r["seed"]: r for r in env_rows if r["ppo_steps"] == first}
        if status.entry is not None and len(at_first) > 1:
            scores = np.array([[at_first[s]["assigned"]] for s in sorted(at_first)])
            iv = iqm_ci({"viewpoints": scores}, confidence=status.confidence)["viewpoints"].iqm
            said = verdict(iv.lo, iv.hi, status.entry.target.value, status.entry.target.direction)
            out.append(
                f"Share of the users in their own group at {first} PPO steps, IQM over "
                f"{len(at_first)} seeds: {fmt_interval(iv)} ({iv.confidence:.0%} stratified "
                f"bootstrap); target {status.entry.target.direction} "
                f"{status.entry.target.value}: **{said}**.\n"
            )
        out.append(
            md_table(
                [
                    "seed",
                    "PPO steps",
                    "groups by BIC",
                    "users in their own group",
                    "group label errors (users, objective)",
                    "corr(forward, height)",
                    "command",
                ],
                [
                    [
                        r["seed"],
                        r["ppo_steps"],
                        r["n_groups"],
                        f"{r['assigned']:.1%}",
                        "; ".join(
                            f"{g['label_error']:.3f} ({g['users']}, {g['objective']})"
                            for g in r["group_errors"]
                        ),
                        f"{r['return_corr']:.2f}",
                        f"`{r['command']}`",
                    ]
                    for r in sorted(env_rows, key=lambda r: (r["seed"], r["ppo_steps"]))
                ],
            )
        )
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())

"""Why the decision makers' label counts of paper 000 come out in another order here (issue 63).

Exploratory (no plan entry, no verdict). Paper 000 reports, per 400 comparisons, 400 labels
for PAIRWISE-DM, 690 for INTERACTIVE-DM and 1,209 for GROUPWISE-DM; the groupwise bench's
runs (``groupwise_table1_skips_*``) give INTERACTIVE-DM more labels than GROUPWISE-DM. A group
comparison of groups G1, G2 gives max(|G1|, |G2|) labels (``preflab.kinds.group.expand``), and
a skipped comparison gives none but uses one of the 400, so the count is (answered
comparisons) × (labels per answered comparison): this bench measures both parts for each
decision maker without training a policy on learned rewards.

Per environment and seed, the pools of segments are made once: PPO on the environment's own
reward runs the groupwise bench's steps in rounds of its ``steps_per_round``, and each round's
segments are collected by the policy of that stage (round 0: random actions), as the loop
collects them; each feedback round the decision maker chooses from the last
``pool`` segments (the groupwise bench's 150) and asks the comparisons of the loop's schedule
(400 in all, a quarter in round 0, hyperbolic after; comparisons a round cannot ask, for lack
of disjoint groups, are asked in the next, as the loop does). GROUPWISE-DM and PAIRWISE-DM choose with
a reward ensemble (3 × (64, 64), as the groupwise bench) fit on their own labels after every
round; INTERACTIVE-DM does not use it. Answers, skip rule (border), editing and label
expansion are the decision makers' of ``preflab.sources.deciders``, with the groupwise bench's
settings (σ = 0.5 × std of random-policy segment returns, groups used ≤ 3 times a round, skips
counted toward the 400).

Swept: INTERACTIVE-DM's ``gap_frac`` (the target difference of the two groups' mean returns as
a share of the range) and the tree groups' largest size (``max_group_size``, the paper's 8) for
both group decision makers. Each row appends to ``--jsonl`` (a row already there is not made
again); the report is rebuilt from all rows.

Run: ``preflab bench groupwise_labels --envs GridWorld Hopper --seeds 300 301 302``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.kinds import kind_of
from preflab.loop import label_schedule
from preflab.policy.agents import make_agent
from preflab.policy.presets import preset
from preflab.policy.rollout import collect_segments
from preflab.records import Label, Segment
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardConfig, RewardEnsemble
from preflab.reward.trainer import FitConfig, RewardTrainer
from preflab.rundir.reporting import append_jsonl, fmt_ci, md_table, read_jsonl
from preflab.selection.groupwise import GroupwiseConfig
from preflab.sources.deciders import DecisionConfig, DecisionMaker, InteractiveSelector
from preflab_bench._groupwise_envs import SPECS, EnvSpec, noise_scale
from preflab_bench._report import RESULTS, command, header, write_report

log = logging.getLogger(__name__)
PAPER_LABELS = {"pairwise": 400, "interactive": 690, "groupwise": 1209}
"""Paper 000, §5.2: mean labels ("preferences") per decision maker over its runs, 400
comparisons each."""
GAP_FRACS = (0.02, 0.05, 0.1, 0.15, 0.3)
"""INTERACTIVE-DM's gap_frac values swept (0.15: the groupwise bench's)."""
MAX_SIZES = (4, 8, 16)
"""Largest tree group swept (8: the paper's and the groupwise bench's)."""
DEFAULT_GAP = InteractiveSelector().gap_frac
DEFAULT_SIZE = 8


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One decision maker with its selection settings."""

    dm: str
    """'pairwise', 'groupwise' or 'interactive'."""
    max_size: int = DEFAULT_SIZE
    """Largest tree group (``max_group_size``)."""
    gap_frac: float | None = None
    """INTERACTIVE-DM's gap_frac (None for the other decision makers)."""
    clean: bool = True
    """The person removes the members perceived beyond the border before answering (the
    groupwise bench's setting); False answers about the groups as chosen."""

    def name(self) -> str:
        if self.dm == "pairwise":
            return "pairwise"
        gap = f", gap {self.gap_frac:g}" if self.gap_frac is not None else ""
        edit = "" if self.clean else ", no editing"
        return f"{self.dm} (max {self.max_size}{gap}{edit})"


def settings(gaps: Sequence[float], sizes: Sequence[int], unedited: bool = True) -> list[Setting]:
    """PAIRWISE-DM, GROUPWISE-DM per size and INTERACTIVE-DM per size and gap; with
    ``unedited``, both group decision makers at the default size and gap without editing."""
    out = [Setting(dm="pairwise")]
    out += [Setting(dm="groupwise", max_size=m) for m in sizes]
    out += [Setting(dm="interactive", max_size=m, gap_frac=g) for m in sizes for g in gaps]
    if unedited:
        out += [
            Setting(dm="groupwise", clean=False),
            Setting(dm="interactive", gap_frac=DEFAULT_GAP, clean=False),
        ]
    return out


def setting_of(row: dict[str, Any]) -> dict[str, Any]:
    """A row's setting (rows made before the ``clean`` option had editing on)."""
    return {"clean": True} | row["setting"]


def stage_pools(spec: EnvSpec, seed: int) -> list[list[Segment]]:
    """Per round of ``spec.steps_per_round`` steps, the segments collected in it: round 0 by
    random actions, round k by PPO after k rounds of training on the true reward."""
    n_stages = max(1, spec.total_steps // spec.steps_per_round)
    tc = TrainConfig(
        env_id=spec.env_id,
        algo=spec.algo,
        seed=seed,
        total_steps=spec.total_steps,
        steps_per_round=spec.steps_per_round,
        agent_kwargs=spec.agent_kwargs,
    )
    venv = make_vec_env(spec.env_id, tc.n_envs, seed=seed)
    hyper = preset(tc.algo, tc.n_envs, tc.steps_per_round, overrides=tc.agent_overrides())
    agent = make_agent(tc.algo, venv, seed=seed, net_arch=list(tc.net_arch), **hyper)
    pools = []
    rng = np.random.default_rng([seed, 7])
    coll = make_vec_env(spec.env_id, 1, seed=30_000 + seed)
    for k in range(n_stages):
        if k > 0:
            agent.learn(spec.steps_per_round, reset_num_timesteps=k == 1, progress_bar=False)
        pools.append(
            collect_segments(
                coll,
                agent if k > 0 else None,
                spec.steps_per_round,
                spec.segment_length,
                rng,
                round=k,
                env_id=spec.env_id,
            )
        )
    coll.close()
    venv.close()
    return pools


def simulate(
    setting: Setting,
    pools: Sequence[Sequence[Segment]],
    spec: EnvSpec,
    sigma: float,
    seed: int,
    *,
    max_group_uses: int = 3,
    fit_epochs: int = 10,
) -> dict[str, Any]:
    """One decision maker choosing and answering every round on the fixed pools; its counts."""
    rng = np.random.default_rng([seed, 1])
    gcfg = GroupwiseConfig(max_size=setting.max_size, max_node_uses=max_group_uses)
    selector = (
        InteractiveSelector(groups=gcfg, gap_frac=setting.gap_frac, noise_std=sigma)
        if setting.dm == "interactive" and setting.gap_frac is not None
        else None
    )
    dm = DecisionMaker(
        setting.dm,
        DecisionConfig(noise_std=sigma, overlap_rule="border", clean_groups=setting.clean),
        rng=np.random.default_rng(1_000 + seed),
        selector=selector,
        max_group_size=setting.max_size,
        max_group_uses=max_group_uses,
    )
    every = [s for pool in pools for s in pool]
    batch = SegmentBatch.from_segments(every)
    rows = {s.id: i for i, s in enumerate(every)}
    segs = {s.id: s for s in every}
    ensemble: RewardEnsemble | None = None
    trainer: RewardTrainer | None = None
    labels: list[Label] = []
    sizes: list[tuple[int, int]] = []
    schedule = label_schedule(spec.comparisons, 0.25, len(pools) - 1, "hyperbolic")
    recent: list[Segment] = []
    edited = 0  # answered comparisons whose groups the person edited before answering
    carry = 0  # comparisons a round could not ask (too few disjoint groups): asked later
    for k, (pool, n) in enumerate(zip(pools, schedule, strict=True)):
        recent = [*recent, *pool][-spec.pool :]
        queries = dm.select(recent, ensemble, n + carry, rng, round=k)
        carry = n + carry - len(queries)
        dm.submit(queries, segs)
        by_id = {q.id: q for q in queries}
        for j in dm.collect():
            if j.p is None:
                continue
            q = by_id[j.query_id]
            labels += kind_of(q).labels(q, j)
            sizes.append((len(q.a), len(q.b) if q.b else 1))
            edited += bool(q.meta.get("edited"))
        if setting.dm != "interactive" and labels:  # the learned reward the selection uses
            if ensemble is None:
                ensemble = RewardEnsemble(
                    batch.obs_dim,
                    batch.act_dim,
                    RewardConfig(members=3, hidden=(64, 64)),
                    seed=seed,
                )
                trainer = RewardTrainer(ensemble, FitConfig(epochs=fit_epochs))
            assert trainer is not None
            first = k == 0
            trainer.fit(
                batch,
                LabelBatch.from_labels(labels, rows),
                rng,
                epochs=3 * fit_epochs if first else None,
                warm=not first,
            )
    st = dm.stats
    g = np.array(sizes, dtype=float).reshape(-1, 2)
    return {
        "setting": asdict(setting),
        "comparisons": st.comparisons,
        "skipped": st.skipped,
        "labels": st.labels,
        "labels_per_answered": st.labels / st.comparisons if st.comparisons else float("nan"),
        "mean_group_size": float(g.mean()) if len(g) else float("nan"),
        "mean_max_size": float(g.max(axis=1).mean()) if len(g) else float("nan"),
        "edited_share": edited / len(g) if len(g) else float("nan"),
        "label_error_rate": st.label_error_rate,
        "asked": sum(schedule),
        "unasked": carry,
    }


# ----- runs ----------------------------------------------------------------------------------
def row_key(r: dict[str, Any]) -> str:
    return json.dumps([r["env"], r["seed"], setting_of(r), r["budget"]], sort_keys=True)


def budget_of(spec: EnvSpec) -> dict[str, Any]:
    return asdict(spec)


def run(args: argparse.Namespace, argv: Sequence[str]) -> None:
    done = {row_key(r) for r in read_jsonl(args.jsonl)} if args.jsonl.exists() else set()
    cmd = command("groupwise_labels", argv)
    for env in args.envs:
        spec = SPECS[env]
        if args.quick:  # two stages of half a round (GridWorld: one PPO rollout of 1,024 steps)
            half = spec.steps_per_round // 2
            spec = replace(
                spec, total_steps=2 * half, steps_per_round=half, comparisons=12, pool=40
            )
        for seed in args.seeds:
            todo = [
                s
                for s in settings(args.gaps, args.sizes)
                if not (args.unedited_only and s.clean)
                if row_key(
                    {"env": env, "seed": seed, "setting": asdict(s), "budget": budget_of(spec)}
                )
                not in done
            ]
            if not todo:
                continue
            t0 = time.process_time()
            pools = stage_pools(spec, seed)
            random_rets = [s.true_return for s in pools[0]]
            sigma = 0.5 * noise_scale(pools[0])
            pool_s = time.process_time() - t0
            for s in todo:
                t1 = time.process_time()
                r = simulate(s, pools, spec, sigma, seed)
                row = {
                    "env": env,
                    "seed": seed,
                    "setting": asdict(s),
                    "budget": budget_of(spec),
                    "noise_std": sigma,
                    "random_return_std": float(np.std(random_rets)),
                    "pool_cpu_s": pool_s,
                    "cpu_s": time.process_time() - t1,
                    "command": cmd,
                    "plan": None,
                } | {k: v for k, v in r.items() if k != "setting"}
                append_jsonl(args.jsonl, row)
                log.info(
                    "%s seed %d %s: %d answered, %d skipped, %d labels",
                    env,
                    seed,
                    s.name(),
                    r["comparisons"],
                    r["skipped"],
                    r["labels"],
                )


# ----- report --------------------------------------------------------------------------------
def _ci(values: Sequence[float], nd: int = 1) -> str:
    return fmt_ci(list(values), nd, n="single", empty="–")


def sweep_table(rows: Sequence[dict[str, Any]], env: str) -> str:
    """Per setting: answered comparisons, skips, labels per answered comparison, mean group
    size, labels per 400 comparisons and label error (mean ± 95% CI over seeds)."""
    out = []
    for s in settings(
        sorted({r["setting"]["gap_frac"] for r in rows if r["setting"]["gap_frac"] is not None}),
        sorted({r["setting"]["max_size"] for r in rows if r["setting"]["dm"] != "pairwise"}),
    ):
        rs = [r for r in rows if r["env"] == env and setting_of(r) == asdict(s)]
        if not rs:
            continue
        scale = 400 / rs[0]["asked"]
        out.append(
            [
                s.name(),
                len(rs),
                _ci([r["comparisons"] for r in rs], 0),
                _ci([100 * r["skipped"] / r["asked"] for r in rs]),
                _ci([r["labels_per_answered"] for r in rs], 2),
                _ci([r["mean_group_size"] for r in rs], 2),
                _ci([100 * r["edited_share"] for r in rs], 0),
                _ci([100 * r["unasked"] / r["asked"] for r in rs]),
                _ci([scale * r["labels"] for r in rs], 0),
                _ci([100 * r["label_error_rate"] for r in rs]),
            ]
        )
    return md_table(
        [
            "decision maker",
            "seeds",
            "answered",
            "skipped %",
            "labels / answered",
            "mean group size",
            "edited %",
            "unasked %",
            "labels per 400",
            "label error %",
        ],
        out,
    )


LOGS = (
    RESULTS / "groupwise_table1_skips_counted_runs.jsonl",
    RESULTS / "groupwise_table1_skips_replaced_runs.jsonl",
)
"""The finished (already reported) runs of the groupwise bench's Table 1 entries."""


def logged_table(paths: Sequence[Path]) -> str:
    """From finished groupwise run logs, per entry, env and decision maker: comparisons
    answered, skips, labels and labels per answered comparison (mean ± 95% CI over seeds).
    Their rows hold no group sizes."""
    out = []
    for path in paths:
        if not path.exists():
            continue
        rows = read_jsonl(path)
        for env in dict.fromkeys(r["env"] for r in rows):
            for dm in ("pairwise", "groupwise", "interactive"):
                rs = [r for r in rows if r["env"] == env and r["dm"] == dm]
                if not rs:
                    continue
                out.append(
                    [
                        path.name.removesuffix("_runs.jsonl").removeprefix("groupwise_table1_"),
                        env,
                        dm,
                        len(rs),
                        _ci([r["dm_comparisons"] for r in rs], 0),
                        _ci([r["dm_skipped"] for r in rs], 0),
                        _ci([r["dm_labels"] for r in rs], 0),
                        _ci([r["dm_labels"] / r["dm_comparisons"] for r in rs], 2),
                    ]
                )
    if not out:
        return ""
    return (
        "## The registered runs (groupwise-table1-skips-counted / -replaced), read from their "
        "run logs\n\n"
        "Per entry, environment and decision maker, mean ± 95% CI over the 5 seeds (15-19). "
        "Labels per answered comparison = labels / comparisons answered; for a group "
        "comparison it is max(|G1|, |G2|). The rows do not log group sizes, so the mean group "
        "size is not available for these runs (the sweep below logs it).\n\n"
        + md_table(
            [
                "entry",
                "env",
                "DM",
                "seeds",
                "answered",
                "skipped",
                "labels",
                "labels / answered",
            ],
            out,
        )
        + "\n"
    )


def report(rows: Sequence[dict[str, Any]], argv: Sequence[str], logs: Sequence[Path] = LOGS) -> str:
    rows = list({row_key(r): r for r in rows}.values())  # a row made twice counts once
    envs = list(dict.fromkeys(r["env"] for r in rows))
    seeds = sorted({r["seed"] for r in rows})
    cmds = sorted({r["command"] for r in rows})
    budgets = "; ".join(
        f"{e}: {b['env_id']}, {b['total_steps']} PPO steps on the true reward in rounds of "
        f"{b['steps_per_round']}, segments of {b['segment_length']} steps, pool of {b['pool']}, "
        f"{b['comparisons']} comparisons"
        for e in envs
        if (b := next(r["budget"] for r in rows if r["env"] == e))
    )
    text = header(
        "Groupwise Table 1: why the label counts come out in another order (exploratory)",
        "groupwise_labels",
        argv,
        budgets + f". Seeds {seeds}.",
    )
    text += "Rows made by:\n\n" + "\n".join(f"- `{c}`" for c in cmds) + "\n\n"
    text += (
        "**Exploratory**: no plan entry, no verdict; seeds disjoint from every plan entry's. "
        "See the module docstring of `benchmarks/preflab_bench/groupwise_labels.py` for the "
        "set-up. Skips count toward the comparisons (the groupwise bench's `--skips count`). "
        f"Paper 000 (per 400 comparisons): {PAPER_LABELS}.\n\n"
    )
    text += logged_table(logs)
    for e in envs:
        text += f"## Sweep: {e}\n\n" + sweep_table(rows, e) + "\n"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench groupwise_labels", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--envs", nargs="+", default=["GridWorld", "Hopper"], choices=list(SPECS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[300, 301, 302])
    ap.add_argument("--gaps", nargs="+", type=float, default=list(GAP_FRACS))
    ap.add_argument("--sizes", nargs="+", type=int, default=list(MAX_SIZES))
    ap.add_argument(
        "--unedited-only", action="store_true", help="only the settings without editing"
    )
    ap.add_argument("--quick", action="store_true", help="tiny budgets (smoke test)")
    ap.add_argument("--report", action="store_true", help="only rebuild the markdown")
    ap.add_argument("--jsonl", type=Path, default=RESULTS / "groupwise_labels_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "groupwise_labels.md")
    args = ap.parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    if any(not 0 < g < 1 for g in args.gaps) or any(m < 2 for m in args.sizes):
        raise ConfigError("--gaps must be in (0, 1) and --sizes at least 2")
    logging.basicConfig(level=logging.INFO)
    torch.set_num_threads(1)
    if not args.report:
        run(args, given)
    if not args.jsonl.exists():
        raise ConfigError(f"no rows in {args.jsonl}; run without --report first")
    write_report(report(read_jsonl(args.jsonl), given), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

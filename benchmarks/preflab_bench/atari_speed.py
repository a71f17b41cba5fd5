"""Cost of the learned reward on Atari: A2C steps per second with and without relabelling.

Side by side in one process: every variant's agent is built (and warmed up) once, then the
agents take turns in short chunks of ``--steps`` agent steps (every variant once per round, in
a fresh random order each round) so that load from other processes hits every variant alike;
``ALE/Pong-v5`` with 16 envs (SB3's Atari wrappers, 4-frame stack) and SB3 A2C (CnnPolicy, the
zoo's Atari settings), torch threads as given:

- ``true``: A2C on the env's (true) reward;
- ``relabel``: A2C on the learned reward: the env reward is replaced by zeros
  (``LearnedRewardVecEnv(defer=True)``) and every finished rollout (5 steps × 16 envs) is
  relabelled by one batched call of the convolutional reward ensemble (3 members, appendix
  A.2) through ``RolloutRelabel`` — the path ``preflab train`` takes, with the default
  inference path (the folded members, :class:`preflab.reward.cnn.FoldedMembers`);
- ``relabel-unfolded-nchw``: the same through the unfolded eval-mode members (batch norm and
  dropout modules, the 1/255 scale on the input) in the NCHW layout (the previous fastest);
- ``relabel-unfolded-cl``: the unfolded members in channels-last (the previous default);
- ``relabel+record``: ``relabel`` plus the ``SegmentRecorder`` that cuts 25-step segments (the
  whole per-step overhead of the loop, without feedback rounds).

Also times one batched forward pass of the ensemble on one rollout (80 frame stacks) for each
path (and ``torch.compile`` of the folded path with ``--compile``). Results go to
``benchmarks/results/atari_speed.md``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, cast

import numpy as np
import torch

from preflab.pixels.atari import make_atari_vec_env
from preflab.policy.agents import make_agent
from preflab.policy.reward_wrapper import LearnedRewardVecEnv, SegmentRecorder
from preflab.policy.rollout_relabel import RolloutRelabel
from preflab.reward.cnn import ConvMember, ConvRewardEnsemble, FoldedMembers
from preflab.reward.ensemble import RewardConfig
from preflab.rundir.reporting import fmt_ci, md_table
from preflab_bench._report import RESULTS, header

ENV = "ALE/Pong-v5"
LEGEND = (
    "Variants: `true` = A2C on the env reward; `relabel` = every 5-step × 16-env rollout "
    "relabelled by one batched call of the 3-member convolutional ensemble through its default "
    "inference path (batch norm folded into the convolutions, no dropout, 1/255 folded into the "
    "first layer, NCHW, lazily rebuilt when the weights change); `relabel-unfolded-nchw` / "
    "`relabel-unfolded-cl` = the same through the eval-mode members as modules in NCHW / "
    "channels-last (the previous paths); `relabel+record` = `relabel` plus the SegmentRecorder "
    "cutting 25-step segments. The extra CPU time is per agent step, relative to `true`.\n\n"
)


def _ensemble(seed: int, *, fold: bool = True, channels_last: bool = True) -> ConvRewardEnsemble:
    ens = ConvRewardEnsemble(
        (4, 84, 84), 6, RewardConfig(kind="cnn", members=3, use_actions=False), seed=seed
    )
    ens.set_channels_last(channels_last)
    ens.fold_inference = fold
    return ens


def _agent(variant: str, n_envs: int, seed: int, ens: ConvRewardEnsemble) -> tuple[Any, Any]:
    venv = make_atari_vec_env(ENV, n_envs, seed)
    if variant == "true":
        return make_agent("a2c", venv, seed=seed, net_arch=[]), None
    if variant == "relabel+record":
        venv = SegmentRecorder(venv, 25, env_id=ENV)

    def reward_fn(obs: np.ndarray, acts: np.ndarray, _nxt: np.ndarray) -> np.ndarray:
        return ens.reward(obs, acts)

    wrapped = LearnedRewardVecEnv(venv, reward_fn, defer=True)
    return make_agent("a2c", wrapped, seed=seed, net_arch=[]), RolloutRelabel(reward_fn)


def _chunk(agent: Any, cb: Any, steps: int) -> tuple[int, float, float]:
    """(agent steps done, wall seconds, CPU seconds of this process) for ``steps`` more steps
    (whole rollouts, so a few more when ``steps`` is not a multiple of the rollout size)."""
    n0 = agent.num_timesteps
    t, c = time.perf_counter(), time.process_time()
    agent.learn(total_timesteps=steps, callback=cb, reset_num_timesteps=False)
    return agent.num_timesteps - n0, time.perf_counter() - t, time.process_time() - c


def _inference(ens: ConvRewardEnsemble, x: np.ndarray) -> np.ndarray:
    with torch.inference_mode():
        return ens.predict(x)


def _no_grad(fn: Any, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return fn(x)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench atari_speed", description=__doc__)
    ap.add_argument(
        "--steps",
        type=int,
        default=400,
        help="agent steps per timed chunk (a multiple of 5 × n-envs)",
    )
    ap.add_argument("--repeats", type=int, default=20, help="rounds of chunks (every variant once)")
    ap.add_argument(
        "--warmup-steps",
        type=int,
        default=None,
        help="untimed agent steps of each variant before the first chunk (default 50 × n-envs: "
        "env resets, allocations)",
    )
    ap.add_argument("--n-envs", type=int, default=16)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument(
        "--compile", action="store_true", help="also time torch.compile of the folded forward"
    )
    ap.add_argument("--forward-repeats", type=int, default=15, help="timed forward passes per path")
    ap.add_argument(
        "--variants",
        default="relabel,relabel-unfolded-nchw,relabel-unfolded-cl,relabel+record",
        help="comma-separated A2C variants to time besides 'true' (always timed)",
    )
    ap.add_argument("--out", default=str(RESULTS / "atari_speed.md"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    ens = _ensemble(0)
    nchw = _ensemble(0, fold=False, channels_last=False)
    chl = _ensemble(0, fold=False, channels_last=True)
    every: dict[str, ConvRewardEnsemble] = {
        "true": ens,
        "relabel": ens,
        "relabel-unfolded-nchw": nchw,
        "relabel-unfolded-cl": chl,
        "relabel+record": ens,
    }
    chosen = ["true", *(v for v in args.variants.split(",") if v and v != "true")]
    unknown = [v for v in chosen if v not in every]
    if unknown:
        ap.error(f"unknown variants {unknown}; choose from {', '.join(every)}")
    variants = {k: every[k] for k in chosen}
    notes = []
    # one rollout's forward pass, every path, interleaved
    x = np.random.default_rng(0).integers(0, 256, (5 * args.n_envs, 4, 84, 84), dtype=np.uint8)
    xt = torch.from_numpy(x)
    fwd_fns: dict[str, Any] = {
        "folded (default)": lambda: ens.predict(x),
        "folded, inference_mode": lambda: _inference(ens, x),
        "unfolded nchw": lambda: nchw.predict(x),
        "unfolded channels-last": lambda: chl.predict(x),
    }
    if args.compile:
        try:
            t = time.perf_counter()
            comp = torch.compile(
                FoldedMembers(cast("list[ConvMember]", list(ens.members))).__call__
            )
            with torch.no_grad():
                comp(xt)
            notes.append(
                f"torch.compile warm-up of the folded path: {time.perf_counter() - t:.1f} s"
            )
            fwd_fns["folded, torch.compile"] = lambda: _no_grad(comp, xt)
        except Exception as exc:  # report, don't fail the benchmark
            notes.append(f"torch.compile failed: {type(exc).__name__}: {str(exc)[:200]}")
    fwd_t: dict[str, list[float]] = {k: [] for k in fwd_fns}
    for fn in fwd_fns.values():
        fn()
    for _ in range(args.forward_repeats):
        for k, fn in fwd_fns.items():
            t = time.process_time()
            fn()
            fwd_t[k].append(time.process_time() - t)
    fwd = {k: float(np.median(v)) for k, v in fwd_t.items()}
    agents = {name: _agent(name, args.n_envs, 0, e) for name, e in variants.items()}
    warmup = args.n_envs * 50 if args.warmup_steps is None else args.warmup_steps
    for agent, cb in agents.values():  # warm-up (env resets, allocations)
        agent.learn(total_timesteps=warmup, callback=cb)
    done = {k: 0 for k in variants}
    wall_s = {k: 0.0 for k in variants}
    cpu_s = {k: 0.0 for k in variants}
    cpu_rates: dict[str, list[float]] = {k: [] for k in variants}
    order_rng = np.random.default_rng(0)
    for r in range(args.repeats):
        names = list(variants)
        order_rng.shuffle(names)  # a fresh order each round: no variant always runs first
        for name in names:
            n, dt, dc = _chunk(*agents[name], args.steps)
            done[name] += n
            wall_s[name] += dt
            cpu_s[name] += dc
            cpu_rates[name].append(n / dc)
        print(
            f"round {r}: "
            + ", ".join(f"{k} {v[-1]:.0f}" for k, v in cpu_rates.items())
            + " agent steps per CPU s",
            flush=True,
        )
    for agent, _cb in agents.values():
        agent.env.close()
    rate = {k: done[k] / cpu_s[k] for k in variants}
    cbase = rate["true"]
    rows = []
    for name in variants:
        # paired within a round: the variant's extra CPU time per agent step vs `true`
        extra = [t / c - 1.0 for t, c in zip(cpu_rates["true"], cpu_rates[name], strict=True)]
        rows.append(
            [
                name,
                done[name],
                rate[name],
                cbase / rate[name] - 1.0,
                fmt_ci(extra),
                f"{min(extra):.3f} … {max(extra):.3f}",
                done[name] / wall_s[name],
            ]
        )
    text = header(
        "A2C on Atari: the cost of the learned reward",
        "atari_speed",
        argv,
        f"{args.steps} agent steps per timed chunk × {args.repeats} rounds, the variants taking "
        f"turns; {args.n_envs} envs; "
        f"torch threads {args.torch_threads}; {ENV}",
    )
    text += (
        "CPU-time rates (this process's CPU seconds; torch uses one thread and the envs run in "
        "this process, so they hardly depend on other processes' load) are the measure; "
        "wall-clock rates are shown for reference and swing with the machine's load.\n\n" + LEGEND
    )
    text += md_table(
        [
            "variant",
            "agent steps timed",
            "agent steps per CPU s",
            "extra CPU time per step vs true",
            "extra per round, paired (mean ± 95% CI)",
            "per round, min … max",
            "agent steps per wall s",
        ],
        rows,
    )
    text += (
        "\nOne batched ensemble forward pass on one A2C rollout ("
        + str(len(x))
        + f" frame stacks, 3 members), CPU seconds, median of {args.forward_repeats}"
        " (the paths interleaved):\n\n"
    )
    text += md_table(
        ["path", "seconds", "vs unfolded nchw"],
        [[k, v, v / fwd["unfolded nchw"]] for k, v in fwd.items()],
    )
    rollout_s = 5 * args.n_envs / cbase
    text += (
        f"\nShare of an A2C rollout's CPU time (5 steps × {args.n_envs} envs at the `true` rate, "
        f"{rollout_s:.3f} s) that one relabelling pass costs: "
        + ", ".join(f"{k} {v / rollout_s:.1%}" for k, v in fwd.items())
        + ".\n"
    )
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    return 0

"""Heat maps of learned state scores on one MultiLock layout (paper 004, Fig. 5).

σ is fit on consecutive state pairs of one fixed layout with (1) fully confident labels
everywhere, (2) 50%-confidence labels for every pair touching a region (the middle room,
outlined red) and confident labels elsewhere, (3) 50% everywhere. Each cell shows σ of the
agent standing there (mean over the four directions; in room k the agent carries key k, in
the last room every door is open). Measured: the spread of σ inside the region as a share of
the map's score range (target < 5% in case 2), and the raw range of case 3 vs case 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from preflab.env_families.grids import LAYOUTS, GridState, LockGridEnv, encode_state
from preflab.llm import (
    ScoreConfig,
    decode_obs,
    fit_state_scores,
    sample_transitions,
    true_preference,
)
from preflab.rundir.reporting import append_jsonl, md_table
from preflab_bench._report import RESULTS, header, log_row

ENV = "PrefLab/MultiLock-v0"


def heat_states(env: LockGridEnv) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Observations (cells × 4 directions) for the heat map, and the cells."""
    lay = env.layout
    base = env.grid_state()
    cells, obs = [], []
    for room in range(lay.n_locks + 1):
        x0, x1 = lay.room_x(room)
        for x in range(x0, x1 + 1):
            for y in range(1, lay.height - 1):
                if (x, y) == base.goal:
                    continue
                final = room == lay.n_locks
                carrying = tuple((i == room) and not final for i in range(lay.n_locks))
                opened = tuple(i < room for i in range(lay.n_locks))
                keys = tuple(
                    None if (opened[i] or carrying[i]) else base.keys[i] for i in range(lay.n_locks)
                )
                if (x, y) in [k for k in keys if k is not None]:
                    continue
                cells.append((x, y))
                for d in range(4):
                    obs.append(
                        encode_state(
                            GridState(
                                layout=lay.name,
                                agent=(x, y),
                                direction=d,
                                carrying=carrying,
                                door_open=opened,
                                keys=keys,
                                doors=base.doors,
                                goal=base.goal,
                            )
                        )
                    )
    return np.stack(obs), cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab_bench.llm_fig5", description=__doc__)
    ap.add_argument("--pairs", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--layout-seed", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "llm_fig5.md")
    ap.add_argument(
        "--jsonl",
        type=Path,
        default=RESULTS / "llm_fig5_runs.jsonl",
        help="run log: one row per seed, with this command",
    )
    args = ap.parse_args(argv)
    args.argv, args.plan = argv, ""
    torch.set_num_threads(1)
    t_start = time.perf_counter()
    lay = LAYOUTS["MultiLock"]
    env = gym.make(ENV).unwrapped
    assert isinstance(env, LockGridEnv)  # ENV is a grid world
    env.reset(seed=args.layout_seed)
    obs, cells = heat_states(env)
    rx0, rx1 = lay.room_x(1)
    in_region = np.array([rx0 <= x <= rx1 for x, _ in cells])
    cfg = ScoreConfig(epochs=args.epochs, batch_size=64, l2=1e-4)
    maps: dict[str, list[np.ndarray]] = {"full": [], "region": [], "all50": []}
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        a, b = sample_transitions(ENV, args.pairs, rng, layout_seed=args.layout_seed)
        t = true_preference(a, b, ENV)
        xa = np.array([decode_obs(o, ENV).agent[0] for o in a])
        xb = np.array([decode_obs(o, ENV).agent[0] for o in b])
        touch = ((xa >= rx0) & (xa <= rx1)) | ((xb >= rx0) & (xb <= rx1))
        labels = {"full": t, "region": np.where(touch, 0.5, t), "all50": np.full_like(t, 0.5)}
        for name, p in labels.items():
            sc = fit_state_scores(a, b, p, np.random.default_rng(100 + seed), cfg)
            maps[name].append(sc.scores(obs).reshape(-1, 4).mean(1))
    rows: list[list[str | float]] = []
    for seed in range(args.seeds):
        full, reg, flat = maps["full"][seed], maps["region"][seed], maps["all50"][seed]
        span_full = full.max() - full.min()
        span_reg = reg.max() - reg.min()
        rows.append(
            [
                seed,
                float(np.ptp(full[in_region]) / span_full),
                float(np.ptp(reg[in_region]) / span_reg),
                float(np.ptp(reg[~in_region]) / span_reg),
                float(np.ptp(flat) / span_full),
            ]
        )
        names = ("region_full", "region_50", "outside_50", "range_all50_over_full")
        append_jsonl(
            args.jsonl,
            log_row("llm_fig5", args, ENV, "score", seed, layout_seed=args.layout_seed,
                    pairs=args.pairs, **dict(zip(names, rows[-1][1:], strict=True))),
        )  # fmt: skip
    mean = np.array([r[1:] for r in rows]).mean(0)
    rows.append(["mean", *[float(v) for v in mean]])
    png = args.out.with_suffix(".png")
    _plot(maps, cells, in_region, lay, env, png)
    md = header(
        "State-score heat maps under uncertain labels (paper 004, Fig. 5)",
        "preflab_bench.llm_fig5",
        argv,
        f"MultiLock layout seed {args.layout_seed}, {args.pairs} consecutive state pairs per "
        f"fit, σ = {cfg.hidden} MLP, {cfg.epochs} epochs, batch {cfg.batch_size}, ℓ2 {cfg.l2}; "
        f"{args.seeds} seeds; wall {time.perf_counter() - t_start:.0f} s",
    )
    md += md_table(
        [
            "seed",
            "region spread / range (full confidence)",
            "region spread / range (50% in region)",
            "outside spread / range (50% in region)",
            "raw range (50% everywhere) / raw range (full)",
        ],
        rows,
    )
    ok = mean[1] < 0.05
    md += (
        f"\nTarget: with 50%-confidence labels in the region, the scores there differ by < 5% of "
        f"the score range → measured {mean[1]:.1%} ({'met' if ok else 'NOT met'}); with confident "
        f"labels the same region spans {mean[0]:.0%} of the range. With 50% everywhere the raw "
        f"score range shrinks to {mean[3]:.1%} of the confident model's "
        "(uninformative rewards).\n\n"
        f"![heat maps]({png.name})\n"
    )
    args.out.write_text(md)
    sys.stdout.write(md)
    return 0


def _plot(
    maps: dict[str, list[np.ndarray]],
    cells: list[tuple[int, int]],
    in_region: np.ndarray,
    lay,
    env,
    path: Path,
) -> None:
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    titles = {"full": "100% confident", "region": "50% in red region", "all50": "50% everywhere"}
    fig = Figure(figsize=(13, 3.2))  # outside pyplot, as crowd_fig2
    axes = fig.subplots(1, 3)
    state = env.grid_state()
    for ax, (name, vals) in zip(axes, maps.items(), strict=True):
        grid = np.full((lay.height, lay.width), np.nan)
        for (x, y), v in zip(cells, vals[0], strict=True):
            grid[y, x] = v
        im = ax.imshow(grid, cmap="viridis")
        fig.colorbar(im, ax=ax, fraction=0.03)
        ax.set_title(titles[name])
        ax.plot(*state.goal, "s", color="lime", ms=10)
        for i, door in enumerate(state.doors):
            ax.plot(*door, "D", color=("gold", "royalblue")[i], ms=8)
            k = state.keys[i]
            if k is not None:
                ax.plot(*k, "*", color=("gold", "royalblue")[i], ms=12)
        if name == "region":
            x0, x1 = lay.room_x(1)
            ax.add_patch(
                Rectangle((x0 - 0.5, 0.5), x1 - x0 + 1, lay.height - 2, fill=False, ec="red", lw=2)
            )
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())

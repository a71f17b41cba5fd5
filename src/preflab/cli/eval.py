"""``preflab eval RUN_DIR [--episodes N] [--seed S] [--stochastic] [--json]``: evaluate a run's
trained policy on the env's true reward, and the learned reward's return over the same episodes.

Reads the run directory and writes nothing into it. Episode k starts from ``env.reset(seed=S+k)``;
the default S is the one the run's own final evaluation used (10000 + the run's seed), so
``--episodes`` equal to the run's ``eval_episodes`` repeats the return in its summary.json.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from preflab.errors import ConfigError
from preflab.policy.evaluate import EVAL_SEED_OFFSET
from preflab.seeding import MAX_SEED


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="preflab eval", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    ap.add_argument("run_dir", help="a run directory made by `preflab train`")
    ap.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    ap.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the first episode's reset (default: the run's own evaluation seed)",
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--deterministic",
        dest="deterministic",
        action="store_true",
        default=True,
        help="act with the policy's most likely action (default)",
    )
    mode.add_argument(
        "--stochastic",
        dest="deterministic",
        action="store_false",
        help="sample actions from the policy (seeded: repeatable)",
    )
    ap.add_argument(
        "--device",
        default="auto",
        help="where torch runs the policy and reward model: auto (a CUDA GPU when torch sees "
        "one, else the CPU), cpu, cuda or cuda:N (default auto)",
    )
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise ConfigError(
            f"--seed must be in 0..{MAX_SEED}, got {args.seed} (a reset seed); pass a seed "
            "in that range or leave --seed out for the run's own evaluation seed"
        )
    return args


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _stats(values: list[float]) -> dict[str, float | None]:
    arr = np.asarray(values, np.float64)
    if not arr.size or not np.all(np.isfinite(arr)):
        return {"mean": None, "std": None}
    return {"mean": float(arr.mean()), "std": float(arr.std())}


def evaluate_run(
    run_dir: str | Path,
    *,
    episodes: int,
    seed: int | None,
    deterministic: bool,
    device: str = "auto",
) -> dict[str, Any]:
    """The evaluation as a JSON-ready dict (see :func:`main`); ``device`` as ``--device``."""
    from preflab.env_families import family_of
    from preflab.policy.evaluate import episode_returns
    from preflab.runs import check_run_dir, load_run

    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    config = check_run_dir(run_dir)
    why = family_of(config.env_id).unsupported("eval", config.env_id, str(run_dir))
    if why:
        raise ConfigError(why)
    run = load_run(run_dir, device=device)
    first = EVAL_SEED_OFFSET + config.seed if seed is None else seed
    eps = episode_returns(
        run.agent,
        config.env_id,
        n_episodes=episodes,
        seed=first,
        deterministic=deterministic,
        reward_model=run.reward_model,
    )
    return {
        "run_dir": str(run_dir),
        "env_id": config.env_id,
        "algo": config.algo,
        "episodes": episodes,
        "seed": first,
        "deterministic": deterministic,
        "true_return": _stats([e.true_return for e in eps]),
        "learned_return": _stats([e.learned_return for e in eps]),
        "per_episode": [
            {
                "seed": e.seed,
                "steps": e.steps,
                "true_return": _finite(e.true_return),
                "learned_return": _finite(e.learned_return),
            }
            for e in eps
        ],
    }


def _fmt(x: float | None) -> str:
    return "nan" if x is None else f"{x:.2f}"


def print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    policy = "deterministic" if result["deterministic"] else "stochastic"
    table = Table(
        title=f"{result['run_dir']}: {result['algo']} on {result['env_id']}",
        caption=f"{result['episodes']} episodes from seed {result['seed']}, {policy} policy",
    )
    for name in ("episode", "seed", "steps", "true return", "learned return"):
        table.add_column(name, justify="right")
    for k, e in enumerate(result["per_episode"]):
        table.add_row(
            str(k),
            str(e["seed"]),
            str(e["steps"]),
            _fmt(e["true_return"]),
            _fmt(e["learned_return"]),
        )
    t, r = result["true_return"], result["learned_return"]
    table.add_section()
    table.add_row(
        "mean ± std",
        "",
        "",
        f"{_fmt(t['mean'])} ± {_fmt(t['std'])}",
        f"{_fmt(r['mean'])} ± {_fmt(r['std'])}",
    )
    Console().print(table)


def main(argv: list[str]) -> int:
    args = parse(argv)
    result = evaluate_run(
        args.run_dir,
        episodes=args.episodes,
        seed=args.seed,
        deterministic=args.deterministic,
        device=args.device,
    )
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
    else:
        print_table(result)
    return 0

"""Probe: the reward ensemble's two inference paths on CPU, by batch size and width (issue #11,
part 5).

``RewardEnsemble.net`` evaluates shared input rows either with 3 batched ops over the stacked
members (``baddbmm``) or with one ``addmm`` chain per member; it switches to the per-member chain
from ``preflab.reward.ensemble._MEMBER_CHAIN_ROWS`` rows on. This probe times both paths (by
moving that threshold) for each batch size and hidden width, with one torch thread, and prints
the best time of ``--trials`` trials of 10 calls each, in microseconds (the minimum is the
least disturbed by other jobs on the machine).

Usage: PYTHONPATH=src python benchmarks/probes/inference_paths.py --trials 30
"""

from __future__ import annotations

import argparse
import time

import torch

from preflab.reward import ensemble as ensemble_module
from preflab.reward.ensemble import RewardConfig, RewardEnsemble

ROWS = (1, 64, 256, 512, 1024, 4096, 20_000)
WIDTHS = ((32, 32), (64, 64), (256, 256))


def best_us(ens: RewardEnsemble, x: torch.Tensor, threshold: int, trials: int) -> float:
    """Best mean time of one ``net`` call over ``trials`` trials of 10 calls, in µs."""
    ensemble_module._MEMBER_CHAIN_ROWS = threshold
    best = float("inf")
    with torch.no_grad():
        for _ in range(trials):
            t0 = time.perf_counter()
            for _ in range(10):
                ens.net(x)
            best = min(best, (time.perf_counter() - t0) / 10 * 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--obs-dim", type=int, default=3, help="Pendulum: 3 (+ 1 action)")
    ap.add_argument("--members", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    default = ensemble_module._MEMBER_CHAIN_ROWS
    print("| hidden | rows | batched µs | per member µs | per member / batched |")
    print("| --- | --- | --- | --- | --- |")
    for hidden in WIDTHS:
        cfg = RewardConfig(members=args.members, hidden=hidden)
        ens = RewardEnsemble(args.obs_dim, 1, cfg, seed=0)
        for rows in ROWS:
            x = torch.randn(rows, args.obs_dim + 1, generator=torch.Generator().manual_seed(rows))
            trials = args.trials if rows < 20_000 else max(5, args.trials // 3)
            batched = best_us(ens, x, rows + 1, trials)  # threshold above: batched ops
            member = best_us(ens, x, 0, trials)  # threshold 0: one chain per member
            print(f"| {hidden} | {rows} | {batched:.0f} | {member:.0f} | {member / batched:.2f} |")
    ensemble_module._MEMBER_CHAIN_ROWS = default


if __name__ == "__main__":
    main()

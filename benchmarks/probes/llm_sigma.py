"""Probe: how well does the MultiLock score model σ order states, per architecture (paper 004)?

Offline, no PPO: samples the bench's 6,000 consecutive state pairs (``sample_transitions``,
identical pairs replaced, as ``TransitionSelector`` does), labels them with the synthetic noisy
ranker (accuracy A, N queries, mean of the answers) and fits σ by Bradley–Terry on soft labels
(label smoothing 0.1). Then, on held-out random-walk transitions of fresh layouts (the bench's
``sigma_quality`` set), reports the share of progress-changing transitions σ orders right,
overall and for the transitions that change the task phase (key picked up, door opened).

Arms:
  mlp      the bench's σ: one 64×64 MLP, 20 epochs, batch 128, lr 1e-3, ℓ2 1e-4
  mlp×5    the mean of 5 such members, different initialisations and orders (``--members 5``)
  cnn      paper 004 Table 2 (MultiLock) on a one-hot grid image: conv 16, 32, 64 (2×2), FC
           512-256-128-64-16; the 2×2 pooling is left out (the 6×11 grid is too small for it),
           20 epochs, batch 64, lr 3e-4, no ℓ2

Usage: PYTHONPATH=src python benchmarks/probes/llm_sigma.py --seeds 0 1 2 --accuracy 0.6 --queries 10
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

import preflab.envs  # noqa: F401  (registers the grid worlds)
from preflab.env_families.grids import LAYOUTS, decode_obs
from preflab.llm.progress import progress
from preflab.llm.ranker import noisy_confidences
from preflab.llm.sampling import sample_transitions
from preflab_bench.llm_fig7 import held_out_transitions

ENV = "PrefLab/MultiLock-v0"
LAY = LAYOUTS["MultiLock"]
PAIRS = 6000


def grid_image(obs: np.ndarray) -> np.ndarray:
    """One-hot planes (N, C, H, W): walls, agent × 4 directions, key on the floor, carried key,
    closed door, open door (one plane per lock each), goal."""
    k = LAY.n_locks
    img = np.zeros((len(obs), 6 + 4 * k, LAY.height, LAY.width), np.float32)
    for j, o in enumerate(obs):
        s = decode_obs(o, ENV)
        img[j, 0, [0, -1], :] = 1
        img[j, 0, :, [0, -1]] = 1
        for wx in LAY.walls:
            img[j, 0, :, wx] = 1
        img[j, 1 + s.direction, s.agent[1], s.agent[0]] = 1
        for i in range(k):
            if s.keys[i] is not None:
                img[j, 5 + i, s.keys[i][1], s.keys[i][0]] = 1
            if s.carrying[i]:
                img[j, 5 + k + i] = 1
            dx, dy = s.doors[i]
            img[j, 0, dy, dx] = 0
            img[j, 5 + (3 if s.door_open[i] else 2) * k + i, dy, dx] = 1
        img[j, -1, s.goal[1], s.goal[0]] = 1
    return img


def mlp(d: int, hidden: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    return nn.Sequential(*layers, nn.Linear(d, 1), nn.Flatten(0))


def cnn(channels: int) -> nn.Sequential:
    conv = nn.Sequential(
        nn.Conv2d(channels, 16, 2), nn.ReLU(), nn.Conv2d(16, 32, 2), nn.ReLU(),
        nn.Conv2d(32, 64, 2), nn.ReLU(), nn.Flatten(),
    )  # fmt: skip
    flat = conv(torch.zeros(1, channels, LAY.height, LAY.width)).shape[1]
    return nn.Sequential(conv, mlp(flat, (512, 256, 128, 64, 16)))


def fit(
    model: nn.Module,
    xa: torch.Tensor,
    xb: torch.Tensor,
    p: np.ndarray,
    *,
    epochs: int,
    lr: float,
    batch: int,
    l2: float,
    seed: int,
) -> nn.Module:
    """Bradley–Terry on soft labels with label smoothing 0.1 and coupled ℓ2."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    target = torch.as_tensor(p, dtype=torch.float32) * 0.8 + 0.1
    for _ in range(epochs):
        order = torch.randperm(len(p), generator=gen)
        for i in range(0, len(p), batch):
            idx = order[i : i + batch]
            d = model(xa[idx]) - model(xb[idx])
            loss = nn.functional.binary_cross_entropy_with_logits(d, target[idx])
            if l2:
                loss = loss + l2 * sum((w**2).sum() for w in model.parameters())
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


def pairs(seed: int, at_target: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The bench's pairs of ``seed`` (identical pairs replaced, as ``TransitionSelector`` does)."""
    rng = np.random.default_rng([seed, 1])
    a, b = np.zeros((0, LAY.obs_dim), np.float32), np.zeros((0, LAY.obs_dim), np.float32)
    while len(a) < PAIRS:
        x, y = sample_transitions(ENV, PAIRS, rng, at_target=at_target)
        keep = ~np.all(x == y, axis=1)
        a, b = np.concatenate([a, x[keep]])[:PAIRS], np.concatenate([b, y[keep]])[:PAIRS]
    return a, b


def phase(x: np.ndarray) -> np.ndarray:
    return np.array([decode_obs(o, ENV).phase for o in x])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--accuracy", type=float, default=0.6)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--arms", nargs="+", default=["mlp", "mlp×5", "cnn"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(
        "| seed | accuracy × queries | σ | held-out transitions ordered right | phase changes ordered right |"
    )
    print("| --- | --- | --- | --- | --- |")
    for seed in args.seeds:
        a, b = pairs(seed)
        pa, pb = progress(a, ENV), progress(b, ENV)
        truth = np.where(pa > pb, 1.0, np.where(pa < pb, 0.0, 0.5))
        rng = np.random.default_rng([seed, 7])
        p = noisy_confidences(truth, args.accuracy, args.queries, rng)
        s0, s1 = held_out_transitions(ENV, seed)
        q0, q1 = progress(s0, ENV), progress(s1, ENV)
        moved, crossed = q1 != q0, phase(s0) != phase(s1)
        mu, sd = a.mean(0), a.std(0) + 1e-6

        def flat(x: np.ndarray, mu: np.ndarray = mu, sd: np.ndarray = sd) -> torch.Tensor:
            return torch.as_tensor((x - mu) / sd)

        for arm in args.arms:
            torch.manual_seed(seed)
            score: Callable[[np.ndarray], torch.Tensor]
            if arm.startswith("mlp"):
                n = int(arm.split("×")[1]) if "×" in arm else 1
                kw = dict(epochs=20, lr=1e-3, batch=128, l2=1e-4)
                ms = [
                    fit(mlp(a.shape[1], (64, 64)), flat(a), flat(b), p, seed=10 * seed + m, **kw)
                    for m in range(n)
                ]

                def score(x: np.ndarray, ms: list[nn.Module] = ms) -> torch.Tensor:
                    return sum(m(flat(x)) for m in ms) / len(ms)
            else:
                ia, ib = torch.as_tensor(grid_image(a)), torch.as_tensor(grid_image(b))
                net = fit(
                    cnn(ia.shape[1]), ia, ib, p, epochs=20, lr=3e-4, batch=64, l2=0.0, seed=seed
                )

                def score(x: np.ndarray, net: nn.Module = net) -> torch.Tensor:
                    return net(torch.as_tensor(grid_image(x)))

            with torch.no_grad():
                d = (score(s1) - score(s0)).numpy()
            right = np.sign(d) == np.sign(q1 - q0)
            acc = "exact" if args.accuracy == 1.0 else f"{args.accuracy:.0%} × {args.queries}"
            print(
                f"| {seed} | {acc} | {arm} | {right[moved].mean():.3f} (n={moved.sum()}) "
                f"| {right[crossed].mean():.2f} (n={crossed.sum()}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()

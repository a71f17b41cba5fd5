"""The one place where randomness is created: explicit generators, never global state."""

from __future__ import annotations

import numpy as np
import torch

SeedLike = int | np.random.Generator | None

MAX_SEED = 2**32 - 1
"""The largest seed a run or a reset takes: SB3 seeds NumPy's legacy global generator with it,
which accepts 0..2**32 − 1."""


def make_rng(seed: SeedLike) -> np.random.Generator:
    """Return a generator: pass one through unchanged, or build one from an integer seed."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def spawn(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """Independent child generators (for ensemble members, workers, annotators)."""
    return list(rng.spawn(n))


def derive_seed(rng: np.random.Generator) -> int:
    """A 31-bit integer seed drawn from ``rng`` for libraries that take integers (SB3, gym)."""
    return int(rng.integers(0, 2**31 - 1))


def torch_generator(rng: np.random.Generator) -> torch.Generator:
    """A torch generator seeded from ``rng``, for torch-side sampling and initialisation."""
    g = torch.Generator()
    g.manual_seed(derive_seed(rng))
    return g


def seed_torch(seed: int) -> None:
    """Seed torch's global generator (SB3 and ``nn.Module`` initialisation use it)."""
    torch.manual_seed(seed)

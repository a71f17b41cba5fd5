"""The reward ensemble's forward pass in NumPy, for a few rows at a time.

An off-policy learner asks for the learned reward of one transition per env step. Through torch
that is about a dozen operator dispatches (about 150 µs per step on this machine's CPU); in NumPy,
on copies of the weights, about 30 µs. The copies are taken again whenever a weight or a
standardisation buffer has changed (each tensor's identity and version counter), so both paths
always evaluate the same network. Large batches (relabelling, fits) stay in torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

SMALL_BATCH_ROWS = 16
"""Up to this many rows, :meth:`preflab.reward.RewardEnsemble.predict` runs in NumPy."""

_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "leaky_relu": lambda h: np.where(h > 0, h, np.float32(0.01) * h),  # torch's slope 0.01
    "relu": lambda h: np.maximum(h, np.float32(0)),
    "tanh": np.tanh,
}


def version_key(tensors: Sequence[torch.Tensor]) -> tuple[tuple[int, int], ...]:
    """Changes whenever any of ``tensors`` is replaced or modified in place."""
    return tuple((id(t), t._version) for t in tensors)


@dataclass(frozen=True)
class NumpyMembers:
    """Copies of an MLP ensemble's stacked layers and statistics, evaluated with NumPy."""

    key: tuple[tuple[int, int], ...]
    """:func:`version_key` of the tensors copied."""
    weights: tuple[np.ndarray, ...]
    """Per layer (members, in, out)."""
    biases: tuple[np.ndarray, ...]
    """Per layer (members, 1, out)."""
    in_mean: np.ndarray
    """Input standardisation: mean per feature."""
    in_std: np.ndarray
    """Input standardisation: standard deviation per feature."""
    out_mean: np.ndarray
    """Per-member output mean, shape (members, 1)."""
    out_std: np.ndarray
    """Per-member output standard deviation, shape (members, 1)."""
    activation: str
    """Hidden activation, a key of the ensemble's activations."""

    @classmethod
    def copy_of(
        cls,
        weights: Sequence[torch.Tensor],
        biases: Sequence[torch.Tensor],
        stats: Sequence[torch.Tensor],
        activation: str,
    ) -> NumpyMembers:
        """Copies of the layers and of (in_mean, in_std, out_mean, out_std)."""
        in_mean, in_std, out_mean, out_std = (s.detach().numpy().copy() for s in stats)
        return cls(
            key=version_key([*weights, *biases, *stats]),
            weights=tuple(w.detach().numpy().copy() for w in weights),
            biases=tuple(b.detach().numpy().copy() for b in biases),
            in_mean=in_mean,
            in_std=in_std,
            out_mean=out_mean[:, None],
            out_std=out_std[:, None],
            activation=activation,
        )

    def predict(self, x: np.ndarray, *, normalise: bool) -> np.ndarray:
        """Raw input rows (rows, features), |x| already appended if the model asks for it →
        every member's reward per row (members, rows), standardised per member if asked."""
        act = _ACTIVATIONS[self.activation]
        h = np.matmul((x - self.in_mean) / self.in_std, self.weights[0]) + self.biases[0]
        for w, b in zip(self.weights[1:], self.biases[1:], strict=True):
            h = np.matmul(act(h), w) + b
        out: np.ndarray = h[..., 0]
        return (out - self.out_mean) / self.out_std if normalise else out

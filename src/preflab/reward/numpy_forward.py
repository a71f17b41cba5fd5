"""The reward ensemble's forward pass in NumPy, for a few rows at a time.

An off-policy learner asks for the learned reward of one transition per env step. Through torch
that is about a dozen operator dispatches (about 150 µs per step on this machine's CPU). NumPy
evaluates copies of the weights in which the input standardisation is folded into the first
layer, and the output standardisation (and, for the policy's reward, the average over members and
its re-standardisation) into the last one, in float64: about 15 µs. The copies are taken again
whenever a weight or a statistic has changed (each tensor's identity and version counter), so both
paths always evaluate the same network. Large batches (relabelling, fits) stay in torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

SMALL_BATCH_ROWS = 16
"""Up to this many rows, :meth:`preflab.reward.RewardEnsemble.predict` runs in NumPy."""

_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "leaky_relu": lambda h: np.maximum(h, 0.01 * h),  # torch's slope 0.01 (< 1: max is exact)
    "relu": lambda h: np.maximum(h, 0.0),
    "tanh": np.tanh,
}


def version_key(tensors: Sequence[torch.Tensor]) -> tuple[tuple[int, int], ...]:
    """Changes whenever any of ``tensors`` is replaced or modified in place."""
    return tuple((id(t), t._version) for t in tensors)


@dataclass(frozen=True)
class NumpyMembers:
    """Float64 copies of an MLP ensemble's stacked layers with its statistics folded in."""

    key: tuple[tuple[int, int], ...]
    """:func:`version_key` of the tensors copied."""
    weights: tuple[np.ndarray, ...]
    """Per layer but the last (members, in, out); the first layer takes raw inputs (the input
    standardisation folded in)."""
    biases: tuple[np.ndarray, ...]
    """Per layer but the last (members, 1, out)."""
    last: tuple[np.ndarray, np.ndarray]
    """The last layer, raw outputs: weight (members, in, 1) and bias (members, 1, 1)."""
    last_normalised: tuple[np.ndarray, np.ndarray]
    """The last layer with each member's output standardised (its mean and std folded in)."""
    last_mixed: tuple[np.ndarray, np.ndarray]
    """The last layer whose outputs sum over members to the policy's reward: the standardised
    members averaged, then re-standardised by (mix_mean, mix_std)."""
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
        """Copies of the layers with (in_mean, in_std, out_mean, out_std, mix_mean, mix_std)
        folded in."""
        # .cpu(): a model on a GPU still answers one step's reward here (a no-op on the CPU)
        ws = [w.detach().cpu().numpy().astype(np.float64) for w in weights]
        bs = [b.detach().cpu().numpy().astype(np.float64) for b in biases]
        in_mean, in_std, out_mean, out_std, mix_mean, mix_std = (
            s.detach().cpu().numpy().astype(np.float64) for s in stats
        )
        # ((x - μ) / σ) W + b  =  x (W / σ) + (b - (μ / σ) W)
        first = ws[0] / in_std[None, :, None]
        ws[0], bs[0] = first, bs[0] - np.matmul(in_mean, first)[:, None, :]
        scale = out_std[:, None, None]
        w_last, b_last = ws[-1], bs[-1]
        w_norm, b_norm = w_last / scale, (b_last - out_mean[:, None, None]) / scale
        members, mix = len(w_last), float(mix_std)
        w_mixed = w_norm / (members * mix)
        b_mixed = b_norm / (members * mix) - float(mix_mean) / (members * mix)
        return cls(
            key=version_key([*weights, *biases, *stats]),
            weights=tuple(ws[:-1]),
            biases=tuple(bs[:-1]),
            last=(w_last, b_last),
            last_normalised=(w_norm, b_norm),
            last_mixed=(w_mixed, b_mixed),
            activation=activation,
        )

    def _hidden(self, x: np.ndarray) -> np.ndarray:
        act = _ACTIVATIONS[self.activation]
        h = x
        for w, b in zip(self.weights, self.biases, strict=True):
            h = act(np.matmul(h, w) + b)
        return h

    def predict(self, x: np.ndarray, *, normalise: bool) -> np.ndarray:
        """Raw input rows (rows, features), |x| already appended if the model asks for it →
        every member's reward per row (members, rows), standardised per member if asked."""
        w, b = self.last_normalised if normalise else self.last
        out: np.ndarray = (np.matmul(self._hidden(x), w) + b)[..., 0]
        return out

    def reward(self, x: np.ndarray) -> np.ndarray:
        """The policy's reward of raw input rows (rows, features): (rows,), as
        :meth:`preflab.reward.RewardEnsemble.reward`."""
        w, b = self.last_mixed
        out: np.ndarray = np.add.reduce(np.matmul(self._hidden(x), w) + b, axis=0)[:, 0]
        return out

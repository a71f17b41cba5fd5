"""The JAX part of an SBX agent's state (train states, optimiser states, PRNG keys) as tensors.

SBX keeps its networks outside torch: flax ``TrainState``s (parameters, target parameters,
batch statistics and optax optimiser states) and JAX PRNG keys, on the agent and on its
policy. SB3's ``get_parameters`` sees none of them and SBX's own ``save`` pickles them. Here
each leaf becomes a CPU tensor under a dotted path (``policy.qf_state.params.…``), which the
checkpoint stores with the agent's other tensors, and is put back into the live structure of
a freshly built agent of the same algorithm and sizes (flax's ``from_state_dict``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["capture_jax", "is_jax_agent", "restore_jax"]


def is_jax_agent(agent: Any) -> bool:
    """True for SBX agents (their policy is a ``sbx`` JAX policy)."""
    return type(agent.policy).__module__.startswith("sbx.")


def _owners(agent: Any) -> dict[str, Any]:
    """Where SBX keeps JAX state: the algorithm (its key, the entropy coefficient's train
    state) and its policy (keys, the actor's and critics' train states)."""
    return {"agent": agent, "policy": agent.policy}


def _jax_attrs(obj: Any) -> dict[str, Any]:
    """The attributes of ``obj`` that hold JAX state: arrays (keys) and flax struct nodes."""
    import jax
    from flax import struct

    return {
        name: value
        for name, value in sorted(vars(obj).items())
        if isinstance(value, jax.Array | struct.PyTreeNode)
    }


def _flatten(tree: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(tree, dict):
        for k, v in tree.items():
            _flatten(v, f"{prefix}.{k}", out)
    else:
        out[prefix] = tree


def _to_tensor(leaf: Any) -> torch.Tensor:
    a = np.array(leaf)  # a copy: the checkpoint must not alias JAX's buffers
    return torch.from_numpy(a.view(np.int32) if a.dtype == np.uint32 else a)


def capture_jax(agent: Any) -> dict[str, torch.Tensor]:
    """Every JAX leaf of ``agent`` as a tensor by dotted path (uint32 keys stored as int32)."""
    from flax import serialization

    out: dict[str, torch.Tensor] = {}
    for owner, obj in _owners(agent).items():
        for name, value in _jax_attrs(obj).items():
            flat: dict[str, Any] = {}
            _flatten(serialization.to_state_dict(value), f"{owner}.{name}", flat)
            out |= {k: _to_tensor(v) for k, v in flat.items() if v is not None}
    return out


def restore_jax(agent: Any, tensors: dict[str, torch.Tensor]) -> None:
    """Put what :func:`capture_jax` took back into ``agent`` (built the same way)."""
    import jax.numpy as jnp
    from flax import serialization

    def rebuild(tree: Any, prefix: str) -> Any:
        if isinstance(tree, dict):
            return {k: rebuild(v, f"{prefix}.{k}") for k, v in tree.items()}
        if tree is None:
            return None
        if prefix not in tensors:
            raise ValueError(f"the checkpoint has no JAX state {prefix}")
        a = tensors[prefix].numpy()
        if isinstance(tree, float | int):  # a value SBX set from Python (a learning rate)
            return type(tree)(a.item())
        want = np.asarray(tree)
        if want.dtype == np.uint32:
            a = a.view(np.uint32)
        if a.shape != want.shape:
            raise ValueError(f"{prefix}: shape {a.shape} in the checkpoint, {want.shape} here")
        return jnp.asarray(a, dtype=want.dtype)

    for owner, obj in _owners(agent).items():
        for name, value in _jax_attrs(obj).items():
            state = serialization.to_state_dict(value)
            restored = rebuild(state, f"{owner}.{name}")
            setattr(obj, name, serialization.from_state_dict(value, restored))

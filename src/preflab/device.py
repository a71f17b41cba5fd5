"""Where torch computes: ``--device auto|cpu|cuda|cuda:N`` resolved to a ``torch.device``.

One place decides it for a run (:func:`resolve_device`), before anything is written: ``auto`` is
the first CUDA GPU when torch sees one, else the CPU (on a machine without CUDA exactly the CPU
path PrefLab has always taken); ``cuda`` or ``cuda:N`` on a machine where torch sees no such GPU
is refused in one line that says what was found and what to install. The other helpers keep
checkpoints device-free (:func:`cpu_tensors`: every tensor saved on the CPU) and carry the CUDA
generators' state through a checkpoint. ``docs/guide/devices.md`` is the user's page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from preflab.errors import ConfigError

DEVICE_NAMES = ("auto", "cpu", "cuda", "cuda:N")
"""What ``--device`` takes (N: a GPU's index, 0 for the first)."""

_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")

CUDA_TORCH_HINT = (
    "install a CUDA build of torch (e.g. pip install torch --index-url "
    "https://download.pytorch.org/whl/cu128, matching your driver) or run with --device cpu"
)
"""What to do when a GPU is asked for and torch cannot use one."""


def check_device_name(name: str) -> str:
    """``name`` when it is one of :data:`DEVICE_NAMES`; a ConfigError otherwise (only the
    spelling is checked here: whether the machine has that GPU is :func:`resolve_device`'s)."""
    if not isinstance(name, str) or not _PATTERN.fullmatch(name):
        raise ConfigError(
            f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N' (N a GPU index), got {name!r}"
        )
    return name


def torch_build() -> str:
    """torch's version and what it was built for, e.g. 'torch 2.13.0+cpu (built without
    CUDA)' or 'torch 2.13.0+cu128 (CUDA 12.8)'."""
    cuda = torch.version.cuda
    return f"torch {torch.__version__} ({f'CUDA {cuda}' if cuda else 'built without CUDA'})"


def resolve_device(name: str) -> torch.device:
    """The device ``name`` (:data:`DEVICE_NAMES`) means on this machine: 'auto' is 'cuda:0'
    when ``torch.cuda.is_available()``, else 'cpu'. A ConfigError in one line, saying what
    torch found and what to install, when a GPU is asked for that torch cannot use."""
    check_device_name(name)
    if name == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if name == "auto":
        return torch.device("cuda", 0) if available else torch.device("cpu")
    index = int(name.split(":")[1]) if ":" in name else 0
    if not available:
        raise ConfigError(
            f"--device {name} needs a CUDA GPU, but {torch_build()} finds none "
            f"(torch.cuda.is_available() is False): {CUDA_TORCH_HINT}"
        )
    count = torch.cuda.device_count()
    if index >= count:
        raise ConfigError(
            f"--device {name}: torch sees {count} CUDA GPU(s), numbered 0 to {count - 1}; "
            "pick one of them (or --device cuda for the first)"
        )
    return torch.device("cuda", index)


def agent_device(backend: str, device: torch.device) -> str:
    """The ``device`` argument of the run's agent: the resolved device for SB3 (torch); 'cpu'
    for SBX, whose networks are JAX's (JAX picks its own default backend: a GPU when the
    installed jaxlib has CUDA, see :func:`jax_backend`), as PrefLab has always passed it."""
    return str(device) if backend == "sb3" else "cpu"


def jax_backend() -> str | None:
    """JAX's default backend ('cpu', 'gpu', ...), or None when JAX is not installed."""
    try:
        import jax
    except ImportError:
        return None
    return str(jax.default_backend())


def _any_off_cpu(obj: Any) -> bool:
    if isinstance(obj, torch.Tensor):
        return obj.device.type != "cpu"
    if isinstance(obj, dict):
        return any(_any_off_cpu(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return any(_any_off_cpu(v) for v in obj)
    return False


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj if obj.device.type == "cpu" else obj.detach().cpu()
    if isinstance(obj, dict):
        out = type(obj)() if type(obj) is not dict else {}
        for k, v in obj.items():
            out[k] = _to_cpu(v)
        meta = getattr(obj, "_metadata", None)  # a state_dict's module versions
        if meta is not None:
            out._metadata = meta  # type: ignore[attr-defined]
        return out
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_to_cpu(v) for v in obj)
    return obj


def cpu_tensors(obj: Any) -> Any:
    """``obj`` (tensors in nested dicts, lists and tuples, e.g. state_dicts) with every tensor
    on the CPU, for saving: a checkpoint written on a GPU then loads on a machine without one.
    ``obj`` itself (not a copy) when every tensor is on the CPU already, so a CPU run's files
    are byte for byte what they were before devices existed."""
    return _to_cpu(obj) if _any_off_cpu(obj) else obj


def cuda_rng_states() -> list[torch.Tensor] | None:
    """The CUDA generators' states (one per GPU) when this process has used CUDA, else None
    (a CPU run's checkpoint gets nothing new)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return [s.cpu() for s in torch.cuda.get_rng_state_all()]


def set_cuda_rng_states(states: Sequence[torch.Tensor] | None) -> bool:
    """Put the CUDA generators back (:func:`cuda_rng_states`); False when that cannot be done
    here (no CUDA, another GPU count, or none saved): a run resumed on another device does not
    repeat an uninterrupted one step for step anyway."""
    if not states or not torch.cuda.is_available() or torch.cuda.device_count() != len(states):
        return False
    torch.cuda.set_rng_state_all(list(states))
    return True


__all__ = [
    "DEVICE_NAMES",
    "agent_device",
    "check_device_name",
    "cpu_tensors",
    "cuda_rng_states",
    "jax_backend",
    "resolve_device",
    "set_cuda_rng_states",
    "torch_build",
]

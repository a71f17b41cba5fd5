"""Where torch computes (:mod:`preflab.device`): the names ``--device`` takes, 'auto' on this
machine, the one-line refusal of a GPU that torch cannot use, and device-free saving."""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch

from preflab.config import TrainConfig
from preflab.device import (
    _to_cpu,
    agent_device,
    check_device_name,
    cpu_tensors,
    cuda_rng_states,
    resolve_device,
    set_cuda_rng_states,
    torch_build,
)
from preflab.errors import ConfigError

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")


@pytest.mark.parametrize("name", ["auto", "cpu", "cuda", "cuda:0", "cuda:3"])
def test_every_documented_name_is_accepted(name: str) -> None:
    assert check_device_name(name) == name
    assert TrainConfig(device=name).device == name  # the spelling only: no GPU needed to config


@pytest.mark.parametrize("name", ["gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "mps", ""])
def test_a_misspelt_device_names_the_choices(name: str) -> None:
    with pytest.raises(ConfigError, match=r"'auto', 'cpu', 'cuda' or 'cuda:N'"):
        TrainConfig(device=name)


@no_cuda
def test_auto_is_the_cpu_here() -> None:
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert TrainConfig().device == "auto"  # the default: today's CPU path on this machine
    assert agent_device("sb3", resolve_device("auto")) == "cpu"


def test_sbx_agents_are_given_the_cpu_as_before() -> None:
    assert agent_device("sbx", torch.device("cuda", 1)) == "cpu"  # JAX picks its own device
    assert agent_device("sb3", torch.device("cuda", 1)) == "cuda:1"


@no_cuda
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_a_gpu_torch_cannot_use_is_refused_in_one_line(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_device(name)
    msg = str(info.value)
    assert "\n" not in msg
    assert f"--device {name}" in msg
    assert torch.__version__ in msg and torch_build() in msg  # what was found
    assert "torch.cuda.is_available() is False" in msg
    assert "install a CUDA build of torch" in msg and "--device cpu" in msg  # what to do


def test_cpu_tensors_leaves_a_cpu_state_untouched() -> None:
    state = torch.nn.Linear(3, 2).state_dict()
    tree = {"model": state, "rng": [torch.zeros(4, dtype=torch.uint8)], "n": 3}
    assert cpu_tensors(tree) is tree  # nothing copied: a CPU run saves the same bytes as before


def test_moving_keeps_containers_and_state_dict_metadata() -> None:
    state = torch.nn.BatchNorm1d(2).state_dict()
    moved = _to_cpu({"bn": state, "pair": (torch.ones(1), [torch.zeros(2)])})
    assert isinstance(moved["bn"], OrderedDict) and moved["bn"]._metadata == state._metadata
    assert isinstance(moved["pair"], tuple) and isinstance(moved["pair"][1], list)
    assert all(torch.equal(moved["bn"][k], v) for k, v in state.items())


@no_cuda
def test_no_cuda_generators_are_saved_or_restored_without_cuda() -> None:
    assert cuda_rng_states() is None  # a CPU checkpoint gets no new entry
    assert set_cuda_rng_states([torch.zeros(16, dtype=torch.uint8)]) is False

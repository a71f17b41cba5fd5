"""Checkpoints and model files are device-free: every tensor is saved on the CPU and read with
``map_location='cpu'``, so a run trained on a GPU loads and resumes on a CPU (and the other way
round). Without CUDA here, a "GPU-written" file is made by rewriting the storage location that
``torch.save`` records for each tensor from 'cpu' to 'cuda:0': exactly what a file saved from
CUDA tensors carries, which plain ``torch.load`` refuses on a machine without CUDA."""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from preflab.config import TrainConfig
from preflab.reward.modelfiles import load_reward_model
from preflab.runs import load_run, resume
from preflab.runstate.checkpointer import _FILES, Checkpointer, _digest
from tests.run_support import copy_run

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


def _tensors(tree: Any) -> list[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _tensors(v)]
    if isinstance(tree, list | tuple):
        return [t for v in tree for t in _tensors(v)]
    return []


def _claim_cuda(path: Path) -> None:
    """Rewrite a ``torch.save`` file so that every tensor's storage says it was on 'cuda:0'
    (pickle protocol 2: the location string is a BINUNICODE, memoised after its first use)."""
    z = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as w:
        for name in z.namelist():
            data = z.read(name)
            if name.endswith("data.pkl"):
                assert b"X\x03\x00\x00\x00cpu" in data
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            w.writestr(name, data)
    path.write_bytes(out.getvalue())


def test_a_runs_checkpoint_and_reward_model_hold_cpu_tensors_only(finished: Path) -> None:
    ckpt_dir = Checkpointer(finished).latest()
    for path in (ckpt_dir / "tensors.pt", finished / "reward_model" / "reward_state.pt"):
        tree = torch.load(path, weights_only=True)  # no map_location: as written
        tensors = _tensors(tree)
        assert tensors and all(t.device.type == "cpu" for t in tensors)
    ckpt = Checkpointer(finished).load()
    assert {"agent", "ensemble", "reward_optimizer", "torch_rng"} <= set(ckpt.tensors)
    assert "cuda_rng" not in ckpt.tensors or torch.cuda.is_available()


@no_cuda
def test_a_run_written_on_a_gpu_loads_and_resumes_on_the_cpu(
    finished: Path, tmp_path: Path
) -> None:
    run = copy_run(finished, tmp_path)
    ckpt_dir = Checkpointer(run).latest()
    _claim_cuda(ckpt_dir / "tensors.pt")
    _claim_cuda(run / "reward_model" / "reward_state.pt")
    manifest = json.loads((ckpt_dir / "manifest.json").read_text())
    manifest["files"] = {n: _digest(ckpt_dir / n) for n in _FILES}
    (ckpt_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RuntimeError, match="CUDA"):  # the files now claim a GPU
        torch.load(ckpt_dir / "tensors.pt", weights_only=True)

    loaded = load_run(run)  # the agent and the reward model, on this machine's CPU
    assert loaded.reward_model.device.type == "cpu"
    assert all(p.device.type == "cpu" for p in loaded.agent.policy.parameters())
    assert load_reward_model(run).device.type == "cpu"

    saved = TrainConfig.load(run / "config.json")
    more = dataclasses.replace(saved, total_steps=saved.total_steps + 200, device="cpu")
    result = resume(run, config=more)  # --device may change on resume
    assert result.env_steps >= more.total_steps
    assert result.reward_model.device.type == "cpu"

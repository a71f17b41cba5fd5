"""The checkpointer's names, retention and formats: a checkpoint within a round (after a phase
of it) has its own name beside the round's, LATEST names the newest and the others go; the
format before phases (1) is read, an unknown one refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from preflab.errors import StoreError
from preflab.runstate.checkpointer import Checkpoint, Checkpointer


def _ckpt(n: int) -> Checkpoint:
    return Checkpoint({"n": n}, {"t": torch.tensor([n])}, {"a": np.array([n])})


def _names(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("ckpt-"))


def test_a_phase_checkpoint_has_its_own_name_and_only_the_newest_is_kept(tmp_path: Path) -> None:
    cp = Checkpointer(tmp_path)
    cp.save(0, _ckpt(0))
    cp.save(0, _ckpt(1), phase="pretrained")  # within round 0: ckpt-00000 is not overwritten
    assert (cp.root / "LATEST").read_text() == "ckpt-00000-pretrained"
    assert _names(cp.root) == ["ckpt-00000-pretrained"]
    assert cp.load().state == {"n": 1}
    cp.save(1, _ckpt(2))
    assert _names(cp.root) == ["ckpt-00001"] and cp.load().state == {"n": 2}


@pytest.mark.parametrize("phase", ["../x", "Pre", "pre-trained"])
def test_a_phase_is_lower_case_letters(tmp_path: Path, phase: str) -> None:
    with pytest.raises(ValueError, match="lower-case letters"):
        Checkpointer(tmp_path).save(0, _ckpt(0), phase=phase)
    assert not (tmp_path / "checkpoints" / "LATEST").exists()


def _set_format(cp: Checkpointer, value: object) -> None:
    path = cp.latest() / "manifest.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"format": value}))


def test_the_format_before_phases_is_read_and_an_unknown_one_refused(tmp_path: Path) -> None:
    cp = Checkpointer(tmp_path)
    cp.save(3, _ckpt(3))
    assert json.loads((cp.latest() / "manifest.json").read_text())["format"] == 2
    _set_format(cp, 1)
    assert cp.load().state == {"n": 3}
    _set_format(cp, 3)
    with pytest.raises(StoreError, match=r"has format 3; this PrefLab reads formats 1, 2\. "):
        cp.load()

"""Which phase of its round a checkpoint was written after (:func:`checkpoint_phase`): none for
the fresh start, a round's end and a checkpoint older than phases; an unknown one is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.errors import StoreError
from preflab.loop.snapshot import PRETRAINED, checkpoint_phase
from preflab.runstate import Checkpoint


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ({"fresh": True, "env_id": "x"}, ""),
        ({"fresh": False, "loop": {"round": 2}}, ""),  # written before phases
        ({"fresh": False, "loop": {"round": 2, "phase": ""}}, ""),
        ({"fresh": False, "loop": {"round": 0, "phase": "pretrained"}}, PRETRAINED),
    ],
)
def test_the_phase_a_checkpoint_names(state: dict[str, object], phase: str) -> None:
    assert checkpoint_phase(Checkpoint(state), Path("run")) == phase


@pytest.mark.parametrize("phase", ["warm", 3])
def test_an_unknown_phase_is_refused(phase: object) -> None:
    ckpt = Checkpoint({"fresh": False, "loop": {"round": 0, "phase": phase}})
    with pytest.raises(StoreError, match=r"after phase .* this PrefLab does not know"):
        checkpoint_phase(ckpt, Path("run"))

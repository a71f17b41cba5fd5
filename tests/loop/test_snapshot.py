"""Which phase of its round a checkpoint was written after (:func:`checkpoint_phase`): none for
the fresh start, a round's end and a checkpoint older than phases; an unknown one is refused.
What a checkpoint keeps of the asker (:func:`capture_run`): all of its state."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.errors import StoreError
from preflab.loop.asking import Asker
from preflab.loop.snapshot import PRETRAINED, checkpoint_phase
from preflab.runs import release_run, start_loop
from preflab.runstate import Checkpoint
from preflab.sources.teacher import TeacherConfig


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


def test_a_checkpoint_keeps_all_of_the_askers_state(tmp_path: Path) -> None:
    """The loop's checkpoint state holds everything :meth:`Asker.state` gives (the last fit's
    ties, which the run's end warnings read, and the judgements dropped for good), and an asker
    loads it back; a checkpoint from before the ties were kept loads with none."""
    config = TrainConfig.smoke(teacher=TeacherConfig(equal_threshold=1e9))  # only ties
    loop = start_loop(config, tmp_path / "run")
    try:
        loop._t0 = time.perf_counter()
        loop._random_steps(config.initial_steps)
        loop.run_round(evaluate=False)
        loop.asker.dropped.add("j-undone")  # undone in the studio after it was collected
        saved = loop._capture().state["loop"]
        assert set(loop.asker.state()) <= set(saved)
        back = Asker(config, loop.parts)
        back.load_state(saved)
        assert back.n_ties == loop.asker.n_ties == loop.asker.n_labels > 0
        assert back.dropped == {"j-undone"}
        back.load_state({k: v for k, v in saved.items() if k != "n_ties"})
        assert back.n_ties == 0 and back.n_labels == loop.asker.n_labels
    finally:
        loop.close()
        release_run(loop)

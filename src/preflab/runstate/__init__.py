"""Run-state checkpoints: every piece of mutable state of a run, written atomically.

A checkpoint is a directory ``checkpoints/ckpt-NNNNN`` (the run before round NNNNN;
``ckpt-NNNNN-PHASE`` within that round, after a phase of it such as round 0's pre-training)
holding ``state.json`` (loop, sources, RNGs, agent counters), ``tensors.pt`` (state_dicts:
agent, optimisers, reward ensemble, torch RNG) and ``arrays.npz`` (env and recorder buffers,
replay buffer), with a ``manifest.json`` of their SHA-256 digests and format.
``checkpoints/LATEST`` names the newest complete one and is replaced atomically, so a kill at
any moment leaves the previous checkpoint intact.
"""

from preflab.runstate.checkpointer import Checkpoint, Checkpointer
from preflab.runstate.codec import decode, encode

__all__ = ["Checkpoint", "Checkpointer", "decode", "encode"]

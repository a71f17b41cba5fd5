"""Imported by render workers in test_worker_failures: a FrozenLake replayer that misbehaves.

state 0 → a grey frame; 1 → raises; 2 → kills the worker process; 3 → hangs.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from preflab.media.replay import register_replayer


class Misbehaving:
    def __init__(self, env: Any, size: int) -> None:
        self.size = size

    def frame(self, state: np.ndarray) -> np.ndarray:
        mode = int(state[0])
        if mode == 1:
            raise RuntimeError("replayer exploded on purpose")
        if mode == 2:
            os._exit(3)
        if mode == 3:
            time.sleep(60)
        return np.full((self.size, self.size, 3), 128, np.uint8)

    def close(self) -> None:
        pass


register_replayer(lambda env: type(env).__name__ == "FrozenLakeEnv", Misbehaving)

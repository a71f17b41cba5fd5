"""PrefLab's rounds inside your own ``model.learn(...)``: an SB3 callback.

``PreferenceLearning(config, RUN_DIR)`` builds the run's parts around your model at the start
of ``learn`` (:func:`preflab.runs.start_loop`: the env stack of ``config.env_id`` with the
segment recorder and the learned reward, the store, the source, the selector) and then runs the
loop's own rounds (:meth:`preflab.loop.PreferenceLoop.run_round`) whenever
``config.steps_per_round`` more env steps were taken, at the end of a rollout. The first round
comes after ``config.initial_steps``; a run paced by people waits for their answers there. At
the end of ``learn`` the run is finished as ``preflab train`` finishes it (final evaluation,
``summary.json``), and ``callback.result`` holds the :class:`~preflab.loop.RunResult`::

    from stable_baselines3 import SAC
    from preflab.runs.callbacks import PreferenceLearning
    from preflab.config import TrainConfig

    config = TrainConfig(env_id="Pendulum-v1", algo="sac", total_steps=20_000, total_labels=200)
    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=1_000)
    model.learn(20_000, callback=PreferenceLearning(config, "runs/mine"))

Your model keeps its own hyperparameters; its env is replaced by PrefLab's stack of the same
env id (same spaces and number of envs), so its rewards are the learned ones.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from preflab.aggregate.protocol import Aggregator
from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.loop import PreferenceLoop, RunResult
from preflab.selection.selectors import Selector
from preflab.sources.base import FeedbackSource

log = logging.getLogger(__name__)


class PreferenceLearning(BaseCallback):
    """Preference learning for a user's own SB3 ``model.learn`` (see the module docstring)."""

    def __init__(
        self,
        config: TrainConfig,
        run_dir: str | Path,
        *,
        source: FeedbackSource | None = None,
        selector: Selector | None = None,
        aggregator: Aggregator | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.run_dir = Path(run_dir)
        self.source, self.selector, self.aggregator = source, selector, aggregator
        self.loop: PreferenceLoop | None = None
        """The run's loop, made when ``learn`` starts."""
        self.result: RunResult | None = None
        """The finished run (after ``learn`` returned)."""
        self._inner: BaseCallback | None = None
        self._next_round = config.initial_steps
        self._go_on = True

    def _init_callback(self) -> None:
        from preflab.runs import start_loop  # the run machinery, when learn starts

        c = self.config
        if self.model.n_envs != c.n_envs:
            raise ConfigError(
                f"the model runs {self.model.n_envs} env(s) and the config {c.n_envs}; "
                f"set TrainConfig(n_envs={self.model.n_envs}) or make the model with "
                f"{c.n_envs} env(s)"
            )
        self.loop = loop = start_loop(
            c,
            self.run_dir,
            env=self.model,  # its env becomes PrefLab's stack of config.env_id
            source=self.source,
            selector=self.selector,
            aggregator=self.aggregator,
        )
        self.model._last_obs = loop.agent.env.reset()  # type: ignore[union-attr,assignment]
        self.model._last_episode_starts = np.ones((c.n_envs,), dtype=bool)
        self._inner = loop.callback  # on-policy: the rollout's rewards relabelled at its end
        if self._inner is not None:
            self._inner.init_callback(self.model)
        loop.start_clock()

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        if self._inner is not None:
            self._inner.update_locals(locals_)

    def _on_rollout_start(self) -> None:
        if self._inner is not None:
            self._inner.on_rollout_start()

    def _on_step(self) -> bool:
        if self._inner is not None:
            self._inner.on_step()
        return self._go_on

    def _on_rollout_end(self) -> None:
        if self._inner is not None:
            self._inner.on_rollout_end()
        loop = self.loop
        assert loop is not None, "init_callback made the loop"
        c = self.config
        loop.take_segments()
        if loop.recorder.steps < self._next_round or len(loop.pool) < 2:
            return
        every = c.eval_every_rounds
        first = loop.state.round == 0
        loop.run_round(evaluate=not first and bool(every) and loop.state.round % every == 0)
        self._next_round = loop.recorder.steps + c.steps_per_round
        stop = loop.clock.may_train(loop, c.steps_per_round)
        if stop is not None:  # the owner finished the run, or its deadline passed
            loop.ended_by = stop
            self._go_on = False

    def _on_training_end(self) -> None:
        from preflab.runs import release_run

        loop = self.loop
        if loop is None:
            return
        try:
            self.result = loop.finish()
        finally:
            loop.store.close()
            release_run(loop)

"""The early-termination options of a run (kept free of SB3 so ``preflab.config`` stays light);
the machinery is in :mod:`preflab.policy.termination`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class TerminationConfig:
    """How episodes that end early (a fall) reach the reward model and the policy."""

    fixed_horizon: bool = False
    """Build the env with ``terminate_when_unhealthy=False`` (Hopper, Walker2d, Ant, Humanoid):
    no early termination at all; every episode runs to the time limit."""
    absorbing: bool = False
    """Absorbing states: an indicator feature on every observation, terminated segments kept and
    padded with the absorbing observation, and the policy paid the discounted tail of the
    learned absorbing reward on every terminating step (see preflab.policy.termination)."""

    @property
    def active(self) -> bool:
        """True when either remedy is on (the default run is unchanged when False)."""
        return self.fixed_horizon or self.absorbing

"""Grids of training runs (envs × methods × budgets × seeds) on Ray, or one after another."""

from preflab.sweep.report import write_report
from preflab.sweep.resources import TrialResources
from preflab.sweep.runner import SweepProgress, TrialOutcome, run_sweep, run_trial
from preflab.sweep.spec import SweepSpec, Trial, parse_axis

__all__ = [
    "SweepProgress",
    "SweepSpec",
    "Trial",
    "TrialOutcome",
    "TrialResources",
    "parse_axis",
    "run_sweep",
    "run_trial",
    "write_report",
]

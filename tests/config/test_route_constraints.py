"""--source route: the combinations it refuses, each in CLI terms with what to do instead, and
the run's clock (people in the studio pace it; simulated people do not)."""

from __future__ import annotations

import dataclasses

import pytest

from preflab.config import TrainConfig
from preflab.config.constraints import constraint_problems, start_notes
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.teacher import bpref_teacher


def _problems(**kw: object) -> str:
    return " ".join(constraint_problems(TrainConfig.smoke(source="route", **kw), 200))


def test_a_plain_routed_run_passes() -> None:
    assert constraint_problems(TrainConfig.smoke(source="route"), 200) == []


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"selector": "transitions"}, "--selector disagreement"),
        ({"route": RoutingConfig(ai="vlm")}, "--task"),
        ({"route": RoutingConfig(people="store"), "clock": "steps"}, "drop --clock steps"),
        ({"clock": "labels"}, "--route.people store"),
        ({"route": RoutingConfig(people="crowd"), "selector": "groupwise"}, "pair queries only"),
    ],
)
def test_bad_combinations_are_refused_with_the_fix(kw: dict, says: str) -> None:
    assert says in _problems(**kw)


@pytest.mark.parametrize("name", ["bpref-equal", "bpref-skip"])
def test_routed_oracle_people_may_be_bprefs_relative_teachers(name: str) -> None:
    """The loop sets the margin of the router's people like a run's teacher's
    (tests/sources/test_routing_run.py), so B-Pref's relative teachers are allowed there."""
    assert (
        constraint_problems(TrainConfig.smoke(source="route", teacher=bpref_teacher(name)), 200)
        == []
    )


def test_route_flags_without_the_route_source_are_refused() -> None:
    c = TrainConfig.smoke(route=RoutingConfig(calibration_share=0.5))
    assert any("--route.calibration-share 0.5" in p for p in constraint_problems(c, 200))


def test_people_in_the_studio_pace_the_run() -> None:
    studio = TrainConfig.smoke(source="route", route=RoutingConfig(people="store"))
    assert studio.paced_by_labels
    assert not TrainConfig.smoke(source="route").paced_by_labels
    assert "studio" in " ".join(start_notes(studio, "runs/x", studio=False))
    oracle = dataclasses.replace(studio, route=RoutingConfig(people="oracle"))
    assert start_notes(oracle, "runs/x", studio=False) == []

"""``preflab bench groupwise_labels``: the counts it reports are the decision makers' own: a
comparison gives max(|G1|, |G2|) labels of its groups as answered, and a skip uses the budget."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from preflab.testing.factories import make_segments
from preflab_bench._groupwise_envs import SPECS
from preflab_bench.groupwise_labels import Setting, settings, simulate

SPEC = replace(SPECS["GridWorld"], comparisons=24, pool=40, segment_length=5)


def _pools() -> list[list]:
    rng = np.random.default_rng(0)
    return [make_segments(40, rng=rng, length=5, round=k) for k in range(2)]


def test_pairwise_answers_every_comparison_with_one_label() -> None:
    r = simulate(Setting(dm="pairwise"), _pools(), SPEC, 0.5, 300)
    assert (r["asked"], r["comparisons"], r["skipped"], r["labels"]) == (24, 24, 0, 24)
    assert r["labels_per_answered"] == 1.0


@pytest.mark.parametrize("dm", ["groupwise", "interactive"])
def test_groups_of_two_give_two_labels_and_skips_use_the_budget(dm: str) -> None:
    gap = 0.15 if dm == "interactive" else None
    r = simulate(Setting(dm=dm, max_size=2, gap_frac=gap), _pools(), SPEC, 0.5, 300)
    assert r["comparisons"] + r["skipped"] + r["unasked"] == r["asked"] == 24
    assert r["comparisons"] >= 5
    # labels = Σ max(|G1|, |G2|) over the answered comparisons, their groups as edited (the
    # person removes members perceived beyond the border, so a group of two may keep one)
    assert r["labels"] == pytest.approx(r["comparisons"] * r["mean_max_size"])
    assert 1.0 <= r["mean_group_size"] <= r["mean_max_size"] <= 2.0


def test_the_sweep_has_each_decision_maker_per_size_and_gap() -> None:
    names = [s.name() for s in settings([0.05, 0.3], [4, 8], unedited=False)]
    assert names == [
        "pairwise",
        "groupwise (max 4)",
        "groupwise (max 8)",
        "interactive (max 4, gap 0.05)",
        "interactive (max 4, gap 0.3)",
        "interactive (max 8, gap 0.05)",
        "interactive (max 8, gap 0.3)",
    ]
    assert [s.name() for s in settings([0.3], [4])][-2:] == [
        "groupwise (max 8, no editing)",
        "interactive (max 8, gap 0.15, no editing)",
    ]


def test_without_editing_the_groups_are_answered_as_chosen() -> None:
    s = Setting(dm="interactive", max_size=2, gap_frac=0.15, clean=False)
    r = simulate(s, _pools(), SPEC, 0.5, 300)
    assert r["edited_share"] == 0.0 and r["mean_group_size"] == 2.0
    assert r["labels"] == 2 * r["comparisons"]

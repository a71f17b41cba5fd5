"""A routed run end to end (issue 58): the loop trains on the router's answers, summary.json
carries the split and the AI's accuracy with its interval, and the export carries who answered
and why."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from preflab.cli.train import _add_routing, print_summary
from preflab.config import TrainConfig
from preflab.export.feedback import export_run, read_export
from preflab.runs import release_run, resume, start_loop
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.routing.router import RoutingSource
from preflab.sources.simulated_judge import SimulatedJudge
from preflab.sources.teacher import SyntheticTeacher, TeacherConfig


def test_a_routed_run_reports_its_split_and_exports_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    route = RoutingConfig(min_calibration=3, target_error=0.45, level=0.8, calibration_share=0.3)
    config = TrainConfig.smoke(source="route", total_labels=24, total_steps=400, route=route)
    run_dir = tmp_path / "run"
    loop = start_loop(config, run_dir)
    summary = _add_routing(loop.source, loop.run().summary(), run_dir)
    on_disk = json.loads((run_dir / "summary.json").read_text())
    split = on_disk["routing"]
    assert split == json.loads(json.dumps(summary["routing"]))
    assert sum(split["labels"].values()) == summary["n_labels"] == 24
    assert split["labels"]["people"] >= 1 and split["labels"]["ai"] >= 1
    acc = split["ai_accuracy"]
    assert acc["records"] >= 3 and acc["interval"][0] <= acc["accuracy"] <= acc["interval"][1]
    print_summary(summary, run_dir)  # the final table's row
    labels = split["labels"]
    row = f"labels: model {labels['model']}, AI {labels['ai']}, people {labels['people']}"
    assert row in capsys.readouterr().out.replace("\n", " ")
    out = tmp_path / "export"
    export_run(loop.store, out)
    data = read_export(out)
    answerers = {j.meta["route"]["answerer"] for j in data.judgements}
    assert answerers >= {"ai", "people"}
    assert all(j.meta["route"]["reason"] for j in data.judgements)
    ai = [j for j in data.judgements if j.meta["route"]["answerer"] == "ai"]
    assert all(j.annotator_id == "simulated-judge" and j.meta["ai_judgements"] for j in ai)


def _pendulum_paid_to_live() -> gym.Env:
    """Pendulum with 8 added to every step's reward: its returns, and so B-Pref's margin, are
    positive (B-Pref's skip and equal rules never fire below a margin of 0, as on Pendulum)."""
    return gym.wrappers.TransformReward(gym.make("Pendulum-v1"), lambda r: float(r) + 8.0)


def _routed_bpref_oracle(route: RoutingConfig) -> tuple[RoutingSource, SyntheticTeacher]:
    """A router whose people are B-Pref's skip and equal teacher (as ``--route.people oracle``)."""
    people = SyntheticTeacher(
        TeacherConfig(skip_eps=1.0, equal_eps=0.5), np.random.default_rng(2), annotator_id="oracle"
    )
    ai = SimulatedJudge(route.judge, np.random.default_rng(1))
    return RoutingSource(route, np.random.default_rng(0), ai=ai, people=people), people


def _peoples_answers(run_dir: Path) -> list[float | None]:
    with sqlite3.connect(run_dir / "feedback.db") as db:
        return [p for (p,) in db.execute("SELECT p FROM judgements WHERE annotator_id='oracle'")]


def test_routed_oracle_people_get_bprefs_margin_and_skip_and_call_pairs_equal(
    tmp_path: Path,
) -> None:
    """People as B-Pref's relative skip and equal teacher inside the router get the margin the
    loop sets for a teacher that is the run's source (mean return of the last 10 episodes ×
    segment length / episode limit), so they skip and call pairs equal; and so does the fresh
    teacher of a resumed run, whose margin is set again from the checkpointed episodes."""
    route = RoutingConfig(budget_ai=0)  # every query goes to people
    config = TrainConfig.smoke(source="route", total_labels=24, route=route)
    router, people = _routed_bpref_oracle(route)
    run_dir = tmp_path / "run"
    loop = start_loop(config, run_dir, env=_pendulum_paid_to_live, source=router)
    assert loop.hooks.margin_teacher is people
    loop.run()
    loop.store.close()
    release_run(loop)
    episodes = [e["r"] for e in loop.agent.ep_info_buffer][-10:]
    assert episodes  # 200-step episodes ended before the last ask
    assert people.margin == pytest.approx(np.mean(episodes) * config.segment_length / 200)
    first = _peoples_answers(run_dir)
    assert None in first and 0.5 in first  # skipped, and called equal
    more = dataclasses.replace(config, total_steps=1000, total_labels=40)
    router, people = _routed_bpref_oracle(route)
    resume(run_dir, config=more, env=_pendulum_paid_to_live, source=router)
    assert people.margin > 0
    after = _peoples_answers(run_dir)[len(first) :]
    assert None in after and 0.5 in after

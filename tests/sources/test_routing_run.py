"""A routed run end to end (issue 58): the loop trains on the router's answers, summary.json
carries the split and the AI's accuracy with its interval, and the export carries who answered
and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflab.cli.train import _add_routing, print_summary
from preflab.config import TrainConfig
from preflab.export.feedback import export_run, read_export
from preflab.runs import start_loop
from preflab.sources.routing.config import RoutingConfig


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

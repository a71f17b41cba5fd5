"""Routing with the vision-language judge as the AI (``--route.ai vlm``), against the stand-in
server that answers from the frames it receives: the AI's answers are routed with its sample
agreement as confidence, and its server usage is in the routing report."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.config import TrainConfig, VLMOptions
from preflab.runs import start_loop
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.routing.router import RoutingSource
from preflab.testing.vlmserver import FrameJudgeServer, upright

TASK = "swing the pendulum up and keep it upright"


@pytest.mark.slow  # ~17 s: a run that renders clips for the stand-in server
def test_a_routed_run_asks_the_vlm_judge_and_reports_its_usage(tmp_path: Path) -> None:
    with FrameJudgeServer(upright) as srv:
        vlm = VLMOptions(
            base_url=srv.base_url, model="stand-in", frames=2, image_size=64, samples=3
        )
        route = RoutingConfig(ai="vlm", min_calibration=2, target_error=0.45, level=0.8)
        config = TrainConfig.smoke(
            source="route", task=TASK, vlm=vlm, route=route, total_labels=8, total_steps=400
        )
        loop = start_loop(config, tmp_path / "run")
        loop.run()
        asked = srv.requests
    router = loop.source
    assert isinstance(router, RoutingSource)
    rep = router.routing_report()
    assert rep["asked"]["ai"] >= 1 and sum(rep["labels"].values()) == 8
    assert rep["ai_usage"]["requests"] == asked > 0
    held = [r for r in router.routes.values() if "ai_confidence" in r]
    assert held and all(0.5 <= r["ai_confidence"] <= 1.0 for r in held)

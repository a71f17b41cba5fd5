"""What ``preflab export RUN_DIR`` needs from the run beyond its store: the aggregator the run
trained with (its labels become labels.parquet) and its simulated annotators (a crowd's users,
from the latest checkpoint's source state)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from preflab.aggregate import Aggregator
from preflab.records import Annotator


@dataclass(frozen=True, kw_only=True)
class RunExportParts:
    """Run-specific inputs of :func:`preflab.export.feedback.export_run`."""

    aggregator: Aggregator | None = None
    """The run's aggregator (None: not a run directory; labels are one per answer)."""
    simulated: list[Annotator] = field(default_factory=list)
    """Simulated annotators the store does not list (a crowd run's users)."""


def run_export_parts(run_dir: Path) -> RunExportParts:
    """The aggregator named by ``run_dir/config.json`` and the crowd users of its latest
    checkpoint; empty parts when ``run_dir`` holds no config.json (a bare store)."""
    if not (run_dir / "config.json").is_file():
        return RunExportParts()
    from preflab.assemble import make_run_aggregator
    from preflab.config import TrainConfig

    config = TrainConfig.load(run_dir / "config.json")
    simulated: list[Annotator] = []
    if config.source == "crowd":
        from preflab.crowd.source import annotators_from_state

        state = _source_state(run_dir)
        simulated = annotators_from_state(state) if state is not None else []
    return RunExportParts(aggregator=make_run_aggregator(config), simulated=simulated)


def _source_state(run_dir: Path) -> dict[str, object] | None:
    """The source's state in the latest checkpoint (only state.json is read: the replay
    buffer's arrays are not loaded); None when there is no readable checkpoint."""
    from preflab.errors import StoreError
    from preflab.runstate import Checkpointer

    try:
        path = Checkpointer(run_dir).latest() / "state.json"
        source = json.loads(path.read_text()).get("source")
    except (StoreError, OSError, ValueError, AttributeError):
        return None
    return source if isinstance(source, dict) else None

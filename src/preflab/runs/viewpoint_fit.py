"""One reward per viewpoint of a labelling run's crowd (Crowd-PrefRL §5.2; DESIGN.md: "aggregate
each cluster separately, and learn a reward per cluster"): ``preflab fit RUN_DIR
--by-viewpoint``. The viewpoints and their labels are
:func:`preflab.aggregate.viewpoint_labels.viewpoint_labels`; each group's reward is fitted as
:func:`preflab.runs.labelling.fit_labelled` fits the run's one, into
``RUN_DIR/viewpoints/group-G/`` (readable by :func:`preflab.load_reward_model`), and
``RUN_DIR/viewpoints/viewpoints.json`` says who is in which group and what each fit gave."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from preflab.aggregate.viewpoint_labels import viewpoint_labels
from preflab.device import resolve_device
from preflab.errors import DataError
from preflab.runs.labelling import FitResult, fit_reward, read_labelled

FOLDER = "viewpoints"
"""Where a labelling run keeps its rewards per viewpoint."""


def fit_viewpoints(
    run_dir: str | Path,
    *,
    epochs: int | None = None,
    device: str | None = None,
    max_groups: int = 3,
) -> list[FitResult | None]:
    """Per viewpoint (group 0 the largest): its reward fitted on its members' labels, or None
    for a group whose members gave no label; a DataError when SML cannot weigh the answers
    (fewer than three annotators with overlapping answers)."""
    run, config, feedback = read_labelled(run_dir)
    resolve_device(config.device if device is None else device)  # before any work
    if not feedback.judgements:
        raise DataError(
            f"{run} has no answers yet; people answer in the studio (`preflab studio {run}`), "
            "then fit again"
        )
    groups = viewpoint_labels(feedback, max_groups=max_groups)
    out = run / FOLDER
    shutil.rmtree(out, ignore_errors=True)  # the last fit's groups only
    results: list[FitResult | None] = []
    for g, labels in enumerate(groups.labels):
        results.append(
            fit_reward(config, feedback, list(labels), out / f"group-{g}", epochs=epochs,
                       device=device)
            if labels
            else None
        )  # fmt: skip
    vp = groups.viewpoints
    summary = {
        "n_groups": vp.n_groups,
        "bic": [float(b) for b in vp.bic if math.isfinite(b)],
        "groups": [
            {
                "group": g,
                "members": list(groups.members[g]),
                "mean_sml_weight": float(vp.means[g]),
                "n_labels": len(groups.labels[g]),
                "reward_dir": None if r is None else str(r.reward_dir.relative_to(run)),
                "val_loss": None if r is None else r.val_loss,
                "reward_accuracy": None
                if r is None or math.isnan(r.reward_accuracy)
                else r.reward_accuracy,
            }
            for g, r in enumerate(results)
        ],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "viewpoints.json").write_text(json.dumps(summary, indent=2) + "\n")
    return results

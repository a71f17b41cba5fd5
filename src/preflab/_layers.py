"""The layers of the package, bottom to top: the one declared map of PrefLab's import order.

Every top-level folder of ``src/preflab`` and every module at its root is listed exactly once
(``tests/test_layering.py`` checks that, and that every import, lazy ones inside functions
included, points down or sideways and closes no circle). A module may import its own layer and
the layers below. A module inside a folder belongs to the folder's layer. The package root
``preflab`` (the lazy public facade) is the top: no module below it imports ``preflab`` itself.
DESIGN.md ("Data flow") describes the same order.
"""

from __future__ import annotations

LAYERS: tuple[tuple[str, ...], ...] = (
    # records and rules: errors, seeds, canonical records, the kinds of feedback with their
    # label rules (pair, group, ranking, the rating stream's windows), test factories, and the
    # field docstrings read from source (``preflab train --help`` without importing the config)
    (
        "preflab._layers",
        "preflab.errors",
        "preflab.seeding",
        "preflab.records",
        "preflab.fielddocs",
        "preflab.kinds",
        "preflab.testing",
    ),
    # infrastructure: where torch computes (the device), the store, environments and their
    # families, frames, media, the run's checkpoint state and what a run writes (files,
    # trackers, warnings, result statistics)
    (
        "preflab.device",
        "preflab.store",
        "preflab.envs",
        "preflab.env_families",
        "preflab.pixels",
        "preflab.media",
        "preflab.runstate",
        "preflab.rundir",
    ),
    # models: reward models (and their files), the policy with rollouts and evaluation, query
    # selection (random, disagreement, ranking, groupwise with DTW and the behaviour tree),
    # aggregation of answers into labels, exports of a run's feedback
    (
        "preflab.reward",
        "preflab.policy",
        "preflab.selection",
        "preflab.aggregate",
        "preflab.export",
    ),
    # feedback sources: the protocol and what every source shares, the teacher, simulated
    # raters, decision makers and AI judge, routing (handed its answerers), the studio bridge
    ("preflab.sources",),
    # the sources that stand on their own packages: a simulated crowd, the LLM and VLM judges
    ("preflab.crowd", "preflab.llm", "preflab.vlm"),
    # the run's configuration (the sources' options among it) with its checks, and presets
    ("preflab.config", "preflab.presets"),
    # orchestration: rounds and checkpoints
    ("preflab.loop",),
    # the composition root: a TrainConfig and a user's parts into a run's parts
    ("preflab.assemble",),
    # a run as a whole: train, resume, load; its export; offline labelling; SB3 callbacks
    ("preflab.runs",),
    # applications and the public facade
    ("preflab", "preflab.cli", "preflab.studio", "preflab.sweep"),
)
"""Top-level folders and root modules by layer, bottom to top."""


def layer_of(module: str) -> int:
    """The layer of a dotted ``preflab`` module: that of its top-level folder or root module."""
    parts = module.split(".")
    top = ".".join(parts[:2])
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise KeyError(f"{module} is in no layer: add {top} to preflab._layers.LAYERS")

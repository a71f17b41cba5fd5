"""Named run configurations shipped with PrefLab: ``preflab train --preset NAME``.

A preset is a TOML file in this package (the same format as ``--config FILE.toml``), named by
its path below this folder without the suffix, e.g. ``bpref/walker_walk-pebble``. Flags after
``--preset`` override single options. Each file says in its comments where its numbers come
from and where PrefLab differs.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from preflab.errors import ConfigError

ROOT = Path(__file__).parent
"""The folder the preset files live in."""


def preset_names() -> list[str]:
    """Every preset's name, sorted."""
    return sorted(p.relative_to(ROOT).with_suffix("").as_posix() for p in ROOT.rglob("*.toml"))


def preset_path(name: str) -> Path:
    """The TOML file of preset ``name``; a ConfigError naming the presets there are otherwise."""
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"--preset {name}: no such preset.{hint} Presets: {', '.join(names)}")
    return ROOT / f"{name}.toml"

"""The studio server module is light: importing it does not import torch (issue #24)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import preflab

SRC = Path(preflab.__file__).resolve().parents[1]


def test_importing_the_studio_app_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import preflab.studio.app\n"
        "heavy = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print(len(heavy))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "0", (
        "import preflab.studio.app imported torch; find the chain with "
        "`python -X importtime -c 'import preflab.studio.app' 2>&1 | grep -B30 'torch$'`"
    )


def test_groupwise_names_still_load_on_demand() -> None:
    import preflab.groupwise as gw
    from preflab.groupwise.selector import GroupwiseSelector

    assert gw.GroupwiseSelector is GroupwiseSelector
    eager = {"GROUP_LIMIT", "check_groups", "expand"}  # the group kind's, light: loaded at once
    assert sorted(gw.__all__) == sorted({*gw._WHERE, *eager})
    for name in gw.__all__:
        assert getattr(gw, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = gw.nope

"""The studio server module is light: importing it does not import torch (issue #24)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_the_selection_package_and_the_group_kind_are_light() -> None:
    """The groupwise names moved to ``preflab.selection`` and ``preflab.kinds.group``; the
    package itself and the group kind's rule load without torch."""
    code = (
        "import sys\n"
        "import preflab.selection\n"
        "from preflab.kinds.group import GROUP_LIMIT, check_groups, expand\n"
        "print(int('torch' in sys.modules))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "0"

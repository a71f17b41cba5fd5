"""`pip install .` as a wheel (not editable) ships everything PrefLab reads at run time: every
file of the package, the studio's built front end and the presets, and the installed
copy runs from its own folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and the sdist, built as a release would be (``python -m build``)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (whl,) = dist.glob("preflab-*.whl")
    return whl


def test_the_sdist_carries_the_studio_bundle_presets_and_readme(dist: Path) -> None:
    (sdist,) = dist.glob("preflab-*.tar.gz")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for needed in (
        "README.md",
        "pyproject.toml",
        "src/preflab/studio/static/index.html",
        "src/preflab/presets/bpref/walker_walk-pebble.toml",
    ):
        assert needed in names, f"{needed} is not in the sdist"


def test_every_package_file_is_in_the_wheel(wheel: Path) -> None:
    src = ROOT / "src"
    want = {
        p.relative_to(src).as_posix()
        for p in (src / "preflab").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(want - names)
    assert not missing, f"not in the wheel (add them to package-data): {missing[:10]}"
    assert "preflab/studio/static/index.html" in names
    assert any(n.startswith("preflab/studio/static/assets/index-") for n in names)


def test_the_installed_copy_runs_from_its_own_folder(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    code = (
        "import preflab, pathlib, sys;"
        "from preflab.presets import preset_path;"
        "from preflab.cli.main import main;"
        "here = pathlib.Path(preflab.__file__).parent;"
        "assert str(here).startswith(sys.argv[1]), here;"
        "assert (here / 'studio' / 'static' / 'index.html').is_file();"
        "assert preset_path('bpref/walker_walk-pebble').is_relative_to(here);"
        "sys.exit(main(['train', '--preset', 'bpref/walker_walk-pebble', '--print-config']))"
    )
    env = os.environ | {"PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        cwd=tmp_path,  # not the checkout: nothing may come from src/
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'env_id = "dm_control/walker-walk-v0"' in done.stdout
    listing = subprocess.run(
        [sys.executable, "-c", "from preflab.cli.main import main; main(['bench', '--help'])"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listing.returncode == 0 and "packaging" in listing.stdout, listing.stderr[-2000:]

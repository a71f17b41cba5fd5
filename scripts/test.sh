#!/usr/bin/env bash
# Install what the tests need and run them (the README's test command; .ci/run calls it).
# Extra arguments go to pytest, e.g. bash scripts/test.sh -m slow
set -euo pipefail
cd "$(dirname "$0")/.."
# Bytecode: where the environment sets PYTHONDONTWRITEBYTECODE (as this project's CI machines do),
# no .pyc is ever written, and every fresh process compiles each module it imports from source
# again (uv installs without bytecode). The test run starts hundreds of processes, so it writes
# bytecode: into .venv and the checkout's __pycache__ folders (git ignores them), each module
# compiled once. Measured 2026-12-07 (docs/guide/test-time.md): a process importing torch, SB3
# and PrefLab 6.1 s of CPU without bytecode, 3.9 s with; one importing SBX (JAX) 9.3 s and 5.4 s.
unset PYTHONDONTWRITEBYTECODE
# Each step's wall time goes to stderr at its end ("test.sh: setup 95 s"), so a slow check shows
# which step grew.
step_start=$SECONDS
took() { echo "test.sh: $1 $((SECONDS - step_start)) s" >&2; step_start=$SECONDS; }
bash scripts/setup.sh --dev
took setup
.venv/bin/ruff check src tests benchmarks/preflab_bench docs/*.py
.venv/bin/ruff format --check src tests benchmarks/preflab_bench docs/*.py
took ruff
# The type check (settings in pyproject.toml; cache in .mypy_cache/) and, with node >= 20, the
# studio bundle's check (generated API types, tsc --noEmit and a fresh build equal to the committed
# bundle) run in the background beside the docs build and the tests, which leave a core idle
# (below): 46 s off a fresh clone's run. Their output is shown, and their failure fails the run,
# at the end.
checks_log=$(mktemp)
(
  start=$SECONDS
  .venv/bin/mypy src/preflab benchmarks/preflab_bench
  echo "test.sh: mypy $((SECONDS - start)) s (in the background)" >&2
  start=$SECONDS
  bash scripts/build_studio.sh --check
  echo "test.sh: studio-bundle $((SECONDS - start)) s (in the background)" >&2
) >"$checks_log" 2>&1 &
checks=$!
# The documentation site (mkdocs.yml, docs/): --strict fails on a broken link, reference or
# generated page (Results, CLI and API reference are generated here): 13 s on this 2-core
# machine, 33 s with it loaded (load average 10), 2026-12-06.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict -q
took docs-site
export PREFLAB_DOCS_SITE="$PWD/site"  # tests/docs/test_site.py reads this build
# Three workers (pytest-xdist): each module runs whole, in its own order, on one worker (module
# fixtures and README commands that build on each other need that); the longest modules start
# first (tests/conftest.py). Three, not two, on two cores: the studio tests wait for a browser at a
# person's pace and many tests wait for subprocesses, which left a core idle (measured on this
# machine: 616 s with three, 768 s with two; and on 2026-12-04, a slower machine: 1,104 s with
# three, 1,266 s with four, the CPU then busy all the time and a studio test timing out waiting
# for the browser). `-n 0` runs one process.
tests=0
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=40 -n 3 --dist loadfile --no-loadscope-reorder "$@" || tests=$?
took tests
checks_rc=0
wait "$checks" || checks_rc=$?
cat "$checks_log"
rm -f "$checks_log"
if [ "$checks_rc" != 0 ]; then
  echo "test.sh: the type check or the studio bundle's check failed (its output is above)" >&2
  exit 1
fi
exit "$tests"

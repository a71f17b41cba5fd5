#!/usr/bin/env bash
# Install what the tests need and run them (the README's test command; .ci/run calls it).
# Extra arguments go to pytest, e.g. bash scripts/test.sh -m slow
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
.venv/bin/ruff check src tests benchmarks/preflab_bench docs/*.py
.venv/bin/ruff format --check src tests benchmarks/preflab_bench docs/*.py
.venv/bin/mypy src/preflab benchmarks/preflab_bench  # settings in pyproject.toml; cache in .mypy_cache/
# With node >= 20: generated API types, tsc --noEmit and a fresh build equal to the committed bundle
bash scripts/build_studio.sh --check
# The documentation site (mkdocs.yml, docs/): --strict fails on a broken link, reference or
# generated page (Results, CLI and API reference are generated here): 13 s on this 2-core
# machine, 33 s with it loaded (load average 10), 2026-12-06.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict -q
export PREFLAB_DOCS_SITE="$PWD/site"  # tests/docs/test_site.py reads this build
# Three workers (pytest-xdist): each module runs whole, in its own order, on one worker (module
# fixtures and README commands that build on each other need that); the longest modules start
# first (tests/conftest.py). Three, not two, on two cores: the studio tests wait for a browser at a
# person's pace and many tests wait for subprocesses, which left a core idle (measured on this
# machine: 616 s with three, 768 s with two; and on 2026-12-04, a slower machine: 1,104 s with
# three, 1,266 s with four, the CPU then busy all the time and a studio test timing out waiting
# for the browser). `-n 0` runs one process.
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=40 -n 3 --dist loadfile --no-loadscope-reorder "$@"

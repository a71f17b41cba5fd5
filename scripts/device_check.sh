#!/usr/bin/env bash
# The device check (issue 60 item 5; docs/guide/devices.md): PrefLab on a CUDA GPU against the
# same machine's CPU, written as one Markdown table (scripts/device_check.py says what it runs).
#
#   scripts/device_check.sh                  GPU machine: GPU and CPU, table to
#                                            benchmarks/results/device_check_gpu.md
#   scripts/device_check.sh --cpu-only       the CPU half, to benchmarks/results/device_check_cpu.md
#   scripts/device_check.sh --build-wheels   on a machine with the package registry and the GPU
#                                            machine's Python version: PrefLab's wheel and the
#                                            wheels of scripts/device_check/requirements.txt into
#                                            scripts/device_check/wheels/ (ignored by git; pass it
#                                            with the checkout, e.g. the device tool's `carry`)
#
# The GPU machine is expected to have torch and JAX with CUDA. When PrefLab is not importable,
# it is installed offline from scripts/device_check/wheels/ (--no-index: a GPU machine may reach
# no registry); without that folder, from the checkout with pip's defaults (needs a registry).
# Budget: about 8 minutes on a fresh GPU machine (install ~1 min; the checks' sizes are set in
# scripts/device_check.py). Extra arguments go to scripts/device_check.py (e.g. --walker-steps).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
WHEELS=scripts/device_check/wheels

if [ "${1:-}" = "--build-wheels" ]; then
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    "$PY" -m pip wheel -q --no-deps -w "$WHEELS" .
    # the listed packages and their own dependencies, less what the GPU machine brings (torch,
    # JAX, numpy, scipy) and what the check never imports (requirements.txt says why)
    "$PY" -m pip download -q -d "$WHEELS" -r scripts/device_check/requirements.txt
    (cd "$WHEELS" && rm -f torch-* nvidia_* triton-* jax-* jaxlib-* numpy-* scipy-* sympy-* \
        networkx-* mpmath-* opencv* pyarrow-* dm_control-* pandas-* pytz-* tzdata-* \
        scikit_learn-* cuda_* fsspec-* jinja2-* setuptools-*)
    du -sh "$WHEELS"
    exit 0
fi

OUT=benchmarks/results/device_check_gpu.md
for a in "$@"; do [ "$a" = "--cpu-only" ] && OUT=benchmarks/results/device_check_cpu.md; done

if ! "$PY" -c "import preflab" 2>/dev/null; then
    if [ -d "$WHEELS" ]; then
        "$PY" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl
    else
        echo "device_check: PrefLab is not installed and $WHEELS is missing; installing from" \
            "the checkout (needs the package registry; torch stays as installed)" >&2
        "$PY" -m pip install -q . pytest pytest-timeout hypothesis
    fi
fi
exec "$PY" scripts/device_check.py --out "$OUT" "$@"

"""The SBX backend's persistent compilation cache (preflab.policy.jax_cache)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from preflab.policy.jax_cache import enable_compilation_cache
from tests import warm_python

# a new process: JAX reads its cache settings once per process (this one has the tests' cache);
# forked from the tests' warm interpreter (tests/warm_python.py), which has torch, SB3 and PrefLab
# imported but never JAX, so JAX is imported, and reads its settings, in the new process
CHOOSE_SBX_THEN_COMPILE = """
import json
import jax
from preflab.policy.agents import _algo_class
_algo_class("sac", "sbx")
jax.jit(lambda x: x * 2 + 1)(jax.numpy.ones(3)).block_until_ready()
print(json.dumps({"dir": jax.config.jax_compilation_cache_dir,
                  "min_s": jax.config.jax_persistent_cache_min_compile_time_secs}))
"""


def test_choosing_sbx_caches_every_compiled_program_under_the_users_cache_dir(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    out = warm_python.run(
        [sys.executable, "-c", CHOOSE_SBX_THEN_COMPILE],
        env=env | {"XDG_CACHE_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    ).stdout
    cache = tmp_path / "preflab" / "jax"
    assert json.loads(out.strip().splitlines()[-1]) == {"dir": str(cache), "min_s": 0.0}
    assert any(p.name.startswith("jit_") for p in cache.iterdir())  # a sub-second compile


def test_the_users_own_jax_settings_win() -> None:
    import jax  # here, not at collection: every test worker collects this module

    configured = os.environ["JAX_COMPILATION_CACHE_DIR"]  # tests/conftest.py sets it
    assert enable_compilation_cache() == Path(configured)
    assert jax.config.jax_compilation_cache_dir == configured
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        assert enable_compilation_cache() is None
    finally:
        jax.config.update("jax_enable_compilation_cache", True)

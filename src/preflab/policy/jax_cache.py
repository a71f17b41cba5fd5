"""JAX's persistent compilation cache for the SBX backend.

An SBX agent compiles about 70 small XLA programs when it is built and first trained (about 8 s
of CPU here, each program well under JAX's default 1 s caching threshold). With the cache on
disk, every later process that builds the same agent (a resume, the next seed, a test) loads
them instead: a 300-step SBX SAC on Pendulum took 13.9 s of CPU in a new process without it and
5.8 s with it. A loaded program is the one that was compiled, so results do not change.

JAX's own settings win: with ``JAX_COMPILATION_CACHE_DIR`` set the user's cache is used as
configured, and ``JAX_ENABLE_COMPILATION_CACHE=false`` turns caching off.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_CACHE_BYTES = 512 * 2**20
"""Least recently used programs are deleted beyond this size (an SBX agent's are under 1 MB)."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/preflab/jax``, else ``~/.cache/preflab/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "preflab" / "jax"


def enable_compilation_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache for every program size, unless the user has
    configured (or disabled) it; the cache directory in use, or None when it is off. Call it
    before the first JAX compilation of the process (JAX reads the setting once)."""
    import jax

    config: Any = jax.config  # JAX's flags are not typed
    if not config.jax_enable_compilation_cache:
        return None
    configured = config.jax_compilation_cache_dir
    if configured:
        return Path(configured)
    path = default_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.info("JAX compilation cache off: cannot create %s (%s)", path, exc)
        return None
    config.update("jax_compilation_cache_dir", str(path))
    config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if importlib.util.find_spec("filelock") is not None:  # JAX needs it to bound the size
        config.update("jax_compilation_cache_max_size", MAX_CACHE_BYTES)
    return path

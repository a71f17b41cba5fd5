"""Headless MuJoCo rendering for the benchmarks that render (studio_media), set before any test
imports mujoco (the GL backend is fixed at first use)."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

"""What one sweep trial (or one benchmark run) asks of a Ray cluster, and the checks made before
anything is submitted: the request itself, the cluster's address, the shared storage path, and
whether some node of the cluster can ever hold one trial.

Ray places a task on a node with the declared ``num_cpus`` / ``num_gpus`` free (a fractional GPU
shares one device between tasks); a request no node can meet would wait forever, so it is refused
here with the cluster's nodes named instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from preflab.errors import ConfigError

_ADDRESS = re.compile(r"^(auto|local|ray://[^\s]+|[A-Za-z0-9_.\-\[\]:]+:\d{1,5})$")


@dataclass(frozen=True, kw_only=True)
class TrialResources:
    """The resources each trial declares to Ray."""

    cpus: float = 1.0
    """CPUs per trial (``--cpus-per-trial``); the trial's torch uses ``floor(cpus)`` threads, at
    least one."""
    gpus: float = 0.0
    """GPUs per trial (``--gpus-per-trial``): 0, a fraction in (0, 1) to share one GPU between
    trials (0.5 = two trials per GPU), or a whole number. Ray sets ``CUDA_VISIBLE_DEVICES`` for
    the trial; the trial's ``device`` (default ``auto``) then finds that GPU."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.cpus) or self.cpus <= 0:
            raise ConfigError(
                f"--cpus-per-trial must be a number > 0 (e.g. 1 or 0.5), got {self.cpus}"
            )
        if not math.isfinite(self.gpus) or self.gpus < 0:
            raise ConfigError(f"--gpus-per-trial must be ≥ 0 (e.g. 0, 0.25 or 1), got {self.gpus}")
        if self.gpus > 1 and self.gpus != int(self.gpus):
            raise ConfigError(
                f"--gpus-per-trial above 1 must be a whole number of GPUs, got {self.gpus}; "
                "a fraction shares one GPU (0 < g < 1)"
            )

    @property
    def torch_threads(self) -> int:
        """Threads a trial's torch uses: its whole CPUs, at least one."""
        return max(1, int(self.cpus))

    def ray_options(self) -> dict[str, Any]:
        """Options for ``ray.remote(...).options(**...)``: the declared resources, no retry (a
        trial resumes from its checkpoint when the sweep runs again instead)."""
        return {"num_cpus": self.cpus, "num_gpus": self.gpus, "max_retries": 0}

    def slots(self, cluster: Mapping[str, float]) -> int:
        """How many trials the cluster's totals hold at once (at least one)."""
        n = cluster.get("CPU", 0.0) / self.cpus
        if self.gpus:
            n = min(n, cluster.get("GPU", 0.0) / self.gpus)
        return max(1, int(n + 1e-9))

    def check_fits(self, nodes: Sequence[Mapping[str, float]]) -> None:
        """Refuse a request that no single node can meet (it would wait forever)."""
        if not nodes:
            raise ConfigError("the Ray cluster has no live node; start one with `ray start`")
        for node in nodes:
            if node.get("CPU", 0.0) + 1e-9 >= self.cpus and node.get("GPU", 0.0) + 1e-9 >= (
                self.gpus
            ):
                return
        have = ", ".join(
            f"{node.get('CPU', 0.0):g} CPU/{node.get('GPU', 0.0):g} GPU" for node in nodes
        )
        raise ConfigError(
            f"no node of the Ray cluster can run a trial asking {self.cpus:g} CPU and "
            f"{self.gpus:g} GPU (nodes: {have}); lower --cpus-per-trial/--gpus-per-trial or "
            "add a node that has them"
        )


def check_address(address: str) -> str:
    """A Ray address as ``ray.init`` takes it: ``HOST:PORT`` (the head's GCS port, 6379 by
    default), ``ray://HOST:PORT`` (Ray Client), ``auto`` (the cluster started on this machine by
    ``ray start``), or empty for a fresh local instance."""
    address = address.strip()
    if address and not _ADDRESS.match(address):
        raise ConfigError(
            f"--address {address!r} is not a Ray address; expected HOST:PORT of the head (e.g. "
            "10.0.0.1:6379, as `ray start --head` prints), ray://HOST:PORT, or auto"
        )
    return address


def storage_dir(storage: str | Path, name: str) -> Path:
    """The sweep directory ``STORAGE/NAME`` on a path every node mounts at the same place; the
    storage folder must exist (a mount is not made here) and be writable."""
    root = Path(storage).expanduser()
    if not root.is_absolute():
        raise ConfigError(
            f"--storage {str(storage)!r} must be an absolute path that every node of the cluster "
            "mounts at the same place (e.g. /mnt/shared/sweeps)"
        )
    if not root.is_dir():
        raise ConfigError(
            f"--storage {root} does not exist or is not a folder; mount the shared file system "
            "there (or create it) first"
        )
    probe = root / f".preflab-write-check-{name}"
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"--storage {root} is not writable: {exc}") from exc
    return root / name

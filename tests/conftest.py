"""Shared fixtures: single-threaded torch, a throwaway PostgreSQL cluster on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from preflab.errors import StoreError
from preflab.testing.pgcluster import PostgresCluster

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a fresh PostgreSQL database (scripts/setup.sh --dev installs the server)."""
    try:
        cluster = PostgresCluster.start()
    except StoreError as exc:
        pytest.fail(f"{exc}; run `bash scripts/setup.sh --dev` (installs postgresql)")
    try:
        yield cluster.new_database()
    finally:
        cluster.stop()


# Property-based tests are deterministic: the same examples on every run (no flaky CI).
from hypothesis import settings as _hyp_settings  # noqa: E402

_hyp_settings.register_profile("preflab", derandomize=True, deadline=None, print_blob=True)
_hyp_settings.load_profile("preflab")

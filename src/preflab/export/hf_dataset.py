"""A PrefLab export as a Hugging Face dataset (issue #29): its card, and a loader.

Every export directory gets a ``README.md`` dataset card
(:func:`preflab.export.feedback.write_dataset_card`, written with the export): YAML front
matter that names each parquet table as a ``datasets`` config (so
``datasets.load_dataset(EXPORT_DIR, "labels")`` works on the directory, or on a Hub repository
it is uploaded to), then what the data is: env and version, who answered (pseudonymous ids),
the label convention p = P(a ≻ b), the PrefLab version, counts and a licence field.

:func:`load` gives a ``datasets.DatasetDict`` of every table, with the segments' arrays
(``obs``, ``acts``, ``true_rewards``, from ``segments.npz``) as per-step lists on their rows.
``preflab export --import`` still reads the directory back into a store; converters to other
libraries' label conventions stay at that boundary.

Needs the ``datasets`` package (the ``track`` extra) for :func:`load` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from preflab.errors import ConfigError
from preflab.export.feedback import TABLES, files_of, read_export, read_table
from preflab.records import Segment

__all__ = ["TABLES", "load"]

_STEPS = pa.list_(pa.list_(pa.float64()))
_REWARDS = pa.list_(pa.float64())


def load(directory: str | Path) -> Any:
    """Every table of the export in ``directory`` as a ``datasets.DatasetDict``; the segments
    carry ``obs``, ``acts`` and ``true_rewards`` per step (their real length, no padding).

    The export is read and checked first, as ``preflab export --check`` does (digests, every
    record): a DataError names a missing, truncated or altered file. A table without rows is an
    empty split with its columns."""
    try:
        import datasets
    except ImportError as exc:
        raise ConfigError(
            "loading an export as a Hugging Face dataset needs the datasets package: "
            "pip install 'preflab[track]'"
        ) from exc
    d = Path(directory)
    data = read_export(d)
    splits = {}
    for t in TABLES:
        if f"{t}.parquet" in files_of(data.version):
            table = read_table(d, f"{t}.parquet")
            if t == "segments":
                table = _with_arrays(table, data.segments)
            splits[t] = datasets.Dataset(datasets.table.InMemoryTable(table))
    return datasets.DatasetDict(splits)


def _with_arrays(table: pa.Table, segments: list[Segment]) -> pa.Table:
    """The segments table with each segment's ``obs``, ``acts`` and ``true_rewards`` per step
    (its rows and ``segments`` are in one order: :func:`read_export` checks it)."""
    table = table.append_column("obs", pa.array([s.obs.tolist() for s in segments], _STEPS))
    table = table.append_column("acts", pa.array([s.acts.tolist() for s in segments], _STEPS))
    return table.append_column(
        "true_rewards", pa.array([s.true_rewards.tolist() for s in segments], _REWARDS)
    )

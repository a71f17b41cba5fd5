"""A PrefLab export as a Hugging Face dataset (issue #29): a dataset card, and a loader.

Every export directory gets a ``README.md`` dataset card (:func:`write_dataset_card`): YAML
front matter that names each parquet table as a ``datasets`` config (so
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

import hashlib
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from preflab.errors import ConfigError, DataError

TABLES = ("segments", "queries", "judgements", "answers", "labels", "ratings", "annotators")
"""The export's tables, each a dataset config (and a split of :func:`load`'s DatasetDict)."""


def _version() -> str:
    try:
        return metadata.version("preflab")
    except metadata.PackageNotFoundError:
        return "unknown"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_dataset_card(
    out: Path,
    manifest: dict[str, Any],
    *,
    env_ids: list[str],
    sources: dict[str, int],
    annotators: list[str],
    license: str = "other",
) -> Path:
    """Write ``out/README.md``, the dataset card of the export in ``out``; returns its path."""
    counts = manifest.get("counts", {})
    configs = "\n".join(
        f"- config_name: {t}\n  data_files: {t}.parquet"
        for t in TABLES
        if (out / f"{t}.parquet").exists()
    )
    # datasets keys its cache of a local folder by the folder's name and the card alone (the
    # card's data_files are relative patterns; the files' paths and contents are not hashed), so
    # two exports in folders of the same name would share one cache entry and the second load
    # would return the first's rows. Each table's sha256 in its config's info tells them apart.
    digests = manifest.get("sha256", {})
    infos = "\n".join(
        f"- config_name: {t}\n  description: PrefLab export table {t}.parquet, sha256 "
        f"{digests.get(f'{t}.parquet') or _sha256(out / f'{t}.parquet')}"
        for t in TABLES
        if (out / f"{t}.parquet").exists()
    )
    who = ", ".join(f"{k} ({v} judgements)" for k, v in sorted(sources.items())) or "none"
    people = ", ".join(annotators[:20]) + (" …" if len(annotators) > 20 else "")
    rows = "\n".join(f"| {k} | {v} |" for k, v in counts.items())
    text = f"""---
license: {license}
tags:
- preference-based-reinforcement-learning
- rlhf
- preflab
configs:
{configs}
dataset_info:
{infos}
---

# PrefLab preference data

Feedback from a PrefLab run{f" ({manifest['source_run']})" if manifest.get("source_run") else ""}:
segments of behaviour, the queries asked about them, the answers given and the labels a reward
model trained on.

- **Environment:** {", ".join(env_ids) or "unknown"}
- **Who answered:** {who}; annotator ids (pseudonymous): {people or "none"}
- **Label convention:** `p = P(a ≻ b)`: 1 when segment `a` is preferred, 0 when `b` is, 0.5
  for "equally good"; `weight` is the label's weight in the reward model's loss.
- **Labels:** `labels` are what the run trained on (aggregator:
  `{manifest.get("labels", {}).get("aggregator", "identity")}`); `answers` hold one label per
  answer.
- **Made by:** PrefLab {_version()}, export format version {manifest.get("version")}.
- **Licence:** `{license}` (set by whoever publishes this data).

| table | rows |
|---|---|
{rows}

Load it with `datasets.load_dataset(PATH, "labels")` (one table), or with
`preflab.export.hf_dataset.load(PATH)` (every table; segments with their `obs`, `acts` and
`true_rewards` per step). `preflab export --import PATH --into RUN_DIR` loads it into a
PrefLab store; `preflab export --check PATH` verifies the files against `manifest.json`.
"""
    path = out / "README.md"
    path.write_text(text, encoding="utf-8")
    return path


def load(directory: str | Path) -> Any:
    """Every table of the export in ``directory`` as a ``datasets.DatasetDict``; the segments
    carry ``obs``, ``acts`` and ``true_rewards`` per step (their real length, no padding)."""
    try:
        import datasets
    except ImportError as exc:
        raise ConfigError(
            "loading an export as a Hugging Face dataset needs the datasets package: "
            "pip install 'preflab[track]'"
        ) from exc
    d = Path(directory)
    if not (d / "manifest.json").is_file():
        raise DataError(
            f"{d} is not a PrefLab export (no manifest.json); make one with preflab export"
        )
    splits = {}
    for t in TABLES:
        if (d / f"{t}.parquet").exists():
            splits[t] = datasets.Dataset.from_parquet(str(d / f"{t}.parquet"))
    with np.load(d / "segments.npz") as z:
        ids = [str(x) for x in z["ids"]]
        lengths = z["lengths"]
        arrays = {
            name: [z[name][i, : int(lengths[i])].tolist() for i in range(len(ids))]
            for name in ("obs", "acts", "true_rewards")
        }
    seg = splits["segments"]
    if list(seg["id"]) != ids:
        raise DataError(f"{d}: segments.parquet and segments.npz list different segments")
    for name, values in arrays.items():
        seg = seg.add_column(name, values)
    splits["segments"] = seg
    return datasets.DatasetDict(splits)

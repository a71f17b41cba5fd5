"""Tensor views of segments and labels: what the reward model trains and predicts on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from preflab.errors import DataError
from preflab.pixels.frames import compact_frames
from preflab.records import Label, Segment, check_finite


@dataclass(frozen=True)
class SegmentBatch:
    """Segments stacked and zero-padded to a common length, with a validity mask."""

    ids: tuple[str, ...]
    """Segment ids, row order."""
    obs: torch.Tensor
    """(N, T, obs_dim) float32; or images (N, T, C, H, W) uint8 (for sliding frame stacks a
    strided view over (N, T + C − 1, H, W) frames: stacks are stored once, not C times)."""
    acts: torch.Tensor
    """(N, T, act_dim) float32."""
    mask: torch.Tensor
    """(N, T) float32, 1 on real steps, 0 on padding."""

    @staticmethod
    def from_segments(segments: Sequence[Segment]) -> SegmentBatch:
        """Stack segments (of possibly different lengths) into one padded batch."""
        if not segments:
            raise DataError("no segments to stack; collect rollouts first")
        if segments[0].obs.ndim == 4 or any(s.obs.ndim == 4 for s in segments):
            return _image_batch(segments)
        obs_dim = segments[0].obs.shape[1]
        act_dim = segments[0].acts.shape[1]
        for s in segments:
            if s.obs.shape[1] != obs_dim or s.acts.shape[1] != act_dim:
                raise DataError(
                    f"segment {s.id} has obs/act dims {s.obs.shape[1]}/{s.acts.shape[1]}, expected "
                    f"{obs_dim}/{act_dim} like segment {segments[0].id}; all segments of one reward "
                    "model must come from the same environment"
                )
        lengths = np.array([s.length for s in segments])
        t_max = int(lengths.max())
        n = len(segments)
        obs = np.zeros((n, t_max, obs_dim), np.float32)
        acts = np.zeros((n, t_max, act_dim), np.float32)
        mask = np.zeros((n, t_max), np.float32)
        for i, s in enumerate(segments):
            obs[i, : s.length] = s.obs
            acts[i, : s.length] = s.acts
            mask[i, : s.length] = 1.0
        return SegmentBatch(
            ids=tuple(s.id for s in segments),
            obs=torch.from_numpy(obs),
            acts=torch.from_numpy(acts),
            mask=torch.from_numpy(mask),
        )

    @staticmethod
    def from_arrays(
        obs: np.ndarray, acts: np.ndarray | None = None, ids: Sequence[str] | None = None
    ) -> SegmentBatch:
        """Equal-length segments from arrays of shape (N, T, obs_dim) and (N, T, act_dim)."""
        obs = np.asarray(obs)
        if obs.ndim == 5 and obs.dtype != np.uint8:
            raise DataError(
                f"image obs (N, T, C, H, W) must be uint8 (0..255), got {obs.dtype}; convert "
                "with (x * 255).round().astype(np.uint8)"
            )
        if obs.ndim != 5:
            obs = np.asarray(obs, np.float32)
            if obs.ndim != 3:
                raise DataError(
                    f"obs must have shape (N, T, obs_dim) or (N, T, C, H, W) uint8, got {obs.shape}"
                )
            check_finite("obs", obs)
        acts_arr = (
            np.zeros((*obs.shape[:2], 0), np.float32)
            if acts is None
            else np.asarray(acts, np.float32)
        )
        if acts_arr.ndim == 2:
            acts_arr = acts_arr[..., None]
        if acts_arr.shape[:2] != obs.shape[:2]:
            raise DataError(
                f"acts shape {acts_arr.shape} does not match obs shape {obs.shape} in (N, T)"
            )
        check_finite("acts", acts_arr)
        ids_t = tuple(ids) if ids is not None else tuple(str(i) for i in range(obs.shape[0]))
        return SegmentBatch(
            ids=ids_t,
            obs=torch.from_numpy(obs),
            acts=torch.from_numpy(np.ascontiguousarray(acts_arr)),
            mask=torch.ones(obs.shape[:2]),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def to(self, device: torch.device) -> SegmentBatch:
        """The batch on ``device`` (itself when it is there already, e.g. always on the CPU).
        A strided view of frame stacks moves its frames once and keeps the view."""
        if self.obs.device == device and self.mask.device == device:
            return self
        return SegmentBatch(
            ids=self.ids,
            obs=_view_to(self.obs, device),
            acts=self.acts.to(device),
            mask=self.mask.to(device),
        )

    @property
    def obs_dim(self) -> int:
        """Width of flat observations (for images: C·H·W)."""
        return int(np.prod(self.obs.shape[2:]))

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """Per-step observation shape: (obs_dim,) or (C, H, W)."""
        return tuple(int(x) for x in self.obs.shape[2:])

    @property
    def is_image(self) -> bool:
        """True for image observations (N, T, C, H, W) uint8."""
        return self.obs.ndim == 5

    @property
    def act_dim(self) -> int:
        return int(self.acts.shape[2])

    def index(self) -> dict[str, int]:
        """Map from segment id to row."""
        return {sid: i for i, sid in enumerate(self.ids)}


def _view_to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` on ``device``; a view over a smaller base (sliding frame stacks) is rebuilt there
    over its moved base, so the frames are copied once, not once per stack."""
    base = t._base
    if (
        base is None
        or base.numel() >= t.numel()
        or not base.is_contiguous()
        or base.storage_offset() != 0
    ):
        return t.to(device)
    return base.to(device).as_strided(t.size(), t.stride(), t.storage_offset())


def _image_batch(segments: Sequence[Segment]) -> SegmentBatch:
    """Image segments as uint8 (N, T, C, H, W); sliding frame stacks are copied once as frames
    (N, T + C − 1, H, W) and seen through a strided view (pixels, issue #13)."""
    shape = segments[0].obs.shape[1:]
    act_dim = segments[0].acts.shape[1]
    for s in segments:
        if s.obs.ndim != 4 or s.obs.shape[1:] != shape or s.acts.shape[1] != act_dim:
            raise DataError(
                f"segment {s.id} has observations {s.obs.shape[1:]} ({s.obs.dtype}) and act dim "
                f"{s.acts.shape[1]}, expected images {shape} and {act_dim} like segment "
                f"{segments[0].id}; all segments of one reward model must come from the same "
                "environment"
            )
    n = len(segments)
    lengths = [s.length for s in segments]
    t_max = max(lengths)
    k, h, w = shape
    frames = [compact_frames(s.obs) for s in segments]
    if all(f is not None for f in frames):
        buf = np.zeros((n, t_max + k - 1, h, w), np.uint8)
        for i, f in enumerate(frames):
            assert f is not None
            buf[i, : f.shape[0]] = f
        obs_t = torch.from_numpy(buf).unfold(1, k, 1).permute(0, 1, 4, 2, 3)
    else:
        full = np.zeros((n, t_max, k, h, w), np.uint8)
        for i, s in enumerate(segments):
            full[i, : s.length] = s.obs
        obs_t = torch.from_numpy(full)
    acts = np.zeros((n, t_max, act_dim), np.float32)
    mask = np.zeros((n, t_max), np.float32)
    for i, s in enumerate(segments):
        acts[i, : s.length] = s.acts
        mask[i, : s.length] = 1.0
    return SegmentBatch(
        ids=tuple(s.id for s in segments),
        obs=obs_t,
        acts=torch.from_numpy(acts),
        mask=torch.from_numpy(mask),
    )


@dataclass(frozen=True)
class LabelBatch:
    """Labels as tensors: rows of a SegmentBatch compared, with p = P(a ≻ b) and weights."""

    a: torch.Tensor
    """(L,) int64 row of the first segment."""
    b: torch.Tensor
    """(L,) int64 row of the second segment."""
    p: torch.Tensor
    """(L,) float32 in [0, 1]."""
    weight: torch.Tensor
    """(L,) float32 ≥ 0."""

    @staticmethod
    def from_labels(labels: Sequence[Label], rows: Mapping[str, int]) -> LabelBatch:
        """Resolve label segment ids to rows of a SegmentBatch (``SegmentBatch.index()``)."""
        missing = sorted({x for lab in labels for x in (lab.a, lab.b) if x not in rows})
        if missing:
            raise DataError(
                f"labels refer to {len(missing)} unknown segment(s), e.g. {missing[:3]}"
            )
        return LabelBatch(
            a=torch.tensor([rows[lab.a] for lab in labels], dtype=torch.int64),
            b=torch.tensor([rows[lab.b] for lab in labels], dtype=torch.int64),
            p=torch.tensor([lab.p for lab in labels], dtype=torch.float32),
            weight=torch.tensor([lab.weight for lab in labels], dtype=torch.float32),
        )

    @staticmethod
    def from_arrays(
        a: np.ndarray, b: np.ndarray, p: np.ndarray, weight: np.ndarray | None = None
    ) -> LabelBatch:
        """Labels from index and probability arrays (validated: p in [0, 1], a ≠ b)."""
        a_t = torch.as_tensor(np.asarray(a), dtype=torch.int64)
        b_t = torch.as_tensor(np.asarray(b), dtype=torch.int64)
        p_np = np.asarray(p, np.float32)
        if not (a_t.shape == b_t.shape == p_np.shape) or a_t.ndim != 1:
            raise DataError(
                f"a, b and p must be 1-D of one length, got {a_t.shape}, {b_t.shape}, {p_np.shape}"
            )
        if np.isnan(p_np).any() or (p_np < 0).any() or (p_np > 1).any():
            raise DataError(
                "label p must lie in [0, 1] (1 = first preferred); found values outside or NaN"
            )
        w = np.ones_like(p_np) if weight is None else np.asarray(weight, np.float32)
        return LabelBatch(a=a_t, b=b_t, p=torch.from_numpy(p_np), weight=torch.from_numpy(w))

    def __len__(self) -> int:
        return int(self.p.shape[0])

    def to(self, device: torch.device) -> LabelBatch:
        """The labels on ``device`` (itself when they are there already)."""
        if self.p.device == device:
            return self
        return LabelBatch(
            a=self.a.to(device),
            b=self.b.to(device),
            p=self.p.to(device),
            weight=self.weight.to(device),
        )

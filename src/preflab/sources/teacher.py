"""Simulated teachers: the B-Pref stochastic preference model (Lee et al. 2021).

P[a ≻ b] = σ(β (Σ_t γ^(H−t) r_t(a) − Σ_t γ^(H−t) r_t(b))), then with probability ε the answer
is flipped (a mistake). If both discounted returns are below ``skip_threshold`` the query is
skipped (p = None); if they differ by less than ``equal_threshold`` the answer is 0.5.
β = ∞, γ = 1, ε = 0, no thresholds is the perfect oracle (the default).

B-Pref's own skip and equal rules are relative (``skip_eps``, ``equal_eps``): each round the loop
sets the teacher's margin to the mean true return of the last 10 episodes that ended in
training (the random steps' included, as B-Pref counts its seed steps' episodes) × segment
length / episode limit (B-Pref's ``new_margin``); the query is skipped when neither segment's
(undiscounted) return exceeds ``skip_eps × margin``, and answered 0.5 when the two returns differ
by less than ``equal_eps × margin``: the paper's rule. (B-Pref's code, and the SURF, RUNE,
QPA and RIME code built on it, set ``eps × margin`` once and then pass that product through
``set_teacher_thres_*``, which multiplies by ε again, so from the second round on their
thresholds are ε² × margin; compare published skip/equal numbers with that in mind.) The loop
finds the teacher with :func:`margin_teacher_of`:
the run's source, or the teacher a source that asks one holds (:class:`HoldsTeacher`: the
router, with the teacher as its people). :data:`BPREF_TEACHERS` names B-Pref's six teachers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds import kind_of
from preflab.records import Judgement, Query, Segment, new_id, now
from preflab.sources.immediate import PendingJudgements


@dataclass(frozen=True, kw_only=True)
class TeacherConfig:
    """Parameters of a simulated annotator."""

    beta: float = math.inf
    """Rationality β (∞: always prefers the segment with the higher return)."""
    gamma: float = 1.0
    """Myopia γ in (0, 1]: step t of H is weighted γ^(H−t) (recent steps count more)."""
    epsilon: float = 0.0
    """Mistake probability: each answer is flipped with this probability."""
    skip_threshold: float | None = None
    """Skip when both segments' returns are below this (None: never skip)."""
    equal_threshold: float = 0.0
    """Answer 0.5 when |R(a) − R(b)| < this."""
    skip_eps: float = 0.0
    """B-Pref's ε_skip: skip when neither segment's return exceeds ε_skip × the margin the loop
    sets (0: off)."""
    equal_eps: float = 0.0
    """B-Pref's ε_equal: answer 0.5 when the returns differ by less than ε_equal × the margin the
    loop sets (0: off)."""
    equal_if_no_reward: bool = False
    """Answer 0.5 when every step of both sides has zero reward (Christiano et al. 2017's Atari oracle: most
    clips of a sparse game show no score change; on for Atari)."""
    score: str = ""
    """Your preference function instead of the env's reward: 'module:function' or
    'path/to/file.py:function', called with each Segment (``obs`` (L, D), ``acts``,
    ``true_rewards``, ``infos``…) and returning a per-step reward (L,) or one score for the
    whole segment. The teacher prefers the higher sum (or score); reward accuracy and
    correlation are then measured against it. Empty: the env's reward."""

    def __post_init__(self) -> None:
        if not self.beta > 0:
            raise ConfigError(f"beta must be > 0 (∞ for a perfect oracle), got {self.beta}")
        if not 0 < self.gamma <= 1:
            raise ConfigError(f"gamma must be in (0, 1], got {self.gamma}")
        if not 0 <= self.epsilon <= 1:
            raise ConfigError(f"epsilon must be in [0, 1], got {self.epsilon}")
        if self.equal_threshold < 0:
            raise ConfigError(f"equal_threshold must be ≥ 0, got {self.equal_threshold}")
        for name in ("skip_eps", "equal_eps"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(
                    f"{name} must be in [0, 1] (B-Pref uses 0.1), got {getattr(self, name)}"
                )


BPREF_TEACHERS: dict[str, TeacherConfig] = {
    "oracle": TeacherConfig(),
    "stoc": TeacherConfig(beta=1.0),
    "mistake": TeacherConfig(epsilon=0.1),
    "skip": TeacherConfig(skip_eps=0.1),
    "equal": TeacherConfig(equal_eps=0.1),
    "myopic": TeacherConfig(gamma=0.9),
}
"""B-Pref's six scripted teachers (Lee et al. 2021, its README's settings): the oracle, the
stochastic ("noisy") teacher β = 1, mistakes ε = 0.1, skip ε_skip = 0.1, equal ε_equal = 0.1 and
the myopic teacher γ = 0.9. ``preflab train --teacher bpref-NAME`` selects one."""


def bpref_teacher(name: str) -> TeacherConfig:
    """The B-Pref teacher ``bpref-NAME`` (or ``NAME``) of :data:`BPREF_TEACHERS`."""
    key = name.removeprefix("bpref-")
    if key not in BPREF_TEACHERS:
        names = ", ".join(f"bpref-{k}" for k in BPREF_TEACHERS)
        raise ConfigError(f"no B-Pref teacher {name!r}; choose one of {names}")
    return BPREF_TEACHERS[key]


SegmentReward = Callable[[Segment], "np.ndarray | float"]
"""A preference function: a Segment's per-step rewards (L,) or one score for the segment."""


def load_score(spec: str, *, option: str = "--teacher.score") -> SegmentReward:
    """The function ``spec`` names: 'package.module:function' (importable) or
    'path/to/file.py:function'. Raises :class:`ConfigError` saying what was expected (naming
    ``option``, the setting that gave it)."""
    import importlib
    import importlib.util
    from pathlib import Path

    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise ConfigError(
            f"{option} {spec!r}: expected 'module:function' or 'file.py:function', e.g. "
            "my_prefs:backwards or ./prefs.py:backwards"
        )
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise ConfigError(f"{option}: no file {path} (from {spec!r})")
            loaded = importlib.util.spec_from_file_location(f"preflab_score_{path.stem}", path)
            assert loaded is not None and loaded.loader is not None
            module = importlib.util.module_from_spec(loaded)
            loaded.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ConfigError:
        raise
    except Exception as exc:  # the user's module failed to import: say where
        raise ConfigError(
            f"{option} {spec!r}: importing {where} failed: {type(exc).__name__}: {exc}"
        ) from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigError(f"{option} {spec!r}: {where} has no function {name!r}")
    return cast(SegmentReward, fn)


def segment_rewards(reward_fn: SegmentReward, seg: Segment) -> np.ndarray:
    """``reward_fn``'s rewards of ``seg`` as (L,) float64: a per-step answer as it is, one score
    for the whole segment as that score on the last step (so its sum is the score). Raises
    :class:`DataError` for any other shape or a non-finite value."""
    try:
        r = np.asarray(reward_fn(seg), np.float64)
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"the preference function's answer for segment {seg.id} is not a number "
            f"or an array of numbers: {exc}"
        ) from exc
    if r.ndim == 0 or (r.shape == (1,) and seg.length != 1):
        out = np.zeros(seg.length, np.float64)
        out[-1] = float(r.reshape(-1)[0])
        r = out
    if r.shape != (seg.length,):
        raise DataError(
            f"the preference function must return one score or ({seg.length},) per-step rewards "
            f"for a {seg.length}-step segment, got shape {r.shape}"
        )
    if not np.all(np.isfinite(r)):
        raise DataError(f"the preference function returned NaN or inf for segment {seg.id}")
    return r


class SyntheticTeacher:
    """A FeedbackSource answering at once from segments' (or ``reward_fn``'s) rewards."""

    def __init__(
        self,
        config: TeacherConfig | None = None,
        rng: np.random.Generator | None = None,
        *,
        annotator_id: str = "teacher",
        reward_fn: SegmentReward | None = None,
    ) -> None:
        self.config = config or TeacherConfig()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.annotator_id = annotator_id
        self.reward_fn = reward_fn
        self.margin = math.nan
        """B-Pref's margin for ``skip_eps`` / ``equal_eps`` (:meth:`set_margin`; NaN: no skip or
        equal answer, as B-Pref before its first training episode ends)."""
        self._pending = PendingJudgements("synthetic_teacher")

    @property
    def uses_margin(self) -> bool:
        """True when the answers depend on the margin (``skip_eps`` or ``equal_eps`` set)."""
        return self.config.skip_eps > 0 or self.config.equal_eps > 0

    def set_margin(self, margin: float) -> None:
        """B-Pref's ``new_margin``: mean true return of the last 10 episodes that ended in
        training (random steps' too) × segment length / episode limit, set by the loop before
        each round's queries."""
        self.margin = float(margin)

    def rewards(self, seg: Segment) -> np.ndarray:
        """The per-step rewards this teacher judges ``seg`` by: ``reward_fn``'s or the env's."""
        if self.reward_fn is None:
            return np.asarray(seg.true_rewards, np.float64)
        return segment_rewards(self.reward_fn, seg)

    def _return(self, seg: Segment) -> float:
        return float(np.sum(self.rewards(seg)))

    def discounted_return(self, seg: Segment) -> float:
        """Σ_t γ^(H−1−t) r_t with the teacher's γ and reward."""
        r = self.rewards(seg)
        if self.config.gamma == 1.0:
            return float(r.sum())
        w = self.config.gamma ** np.arange(seg.length - 1, -1, -1)
        return float((w * r).sum())

    def _no_reward(self, segments: Sequence[Segment]) -> bool:
        """True when ``equal_if_no_reward`` is on and no step of ``segments`` has reward."""
        if not self.config.equal_if_no_reward:
            return False
        return not any(np.any(self.rewards(s)) for s in segments)

    def judge(self, a: Segment, b: Segment) -> float | None:
        """P(a ≻ b) as this teacher answers it: 1, 0, 0.5, or None (skip)."""
        if self._no_reward((a, b)):
            return 0.5
        decided, p = self._relative(self._return(a), self._return(b))
        if decided:
            return p
        return self._answer(self.discounted_return(a), self.discounted_return(b))

    def _relative(self, ra: float, rb: float) -> tuple[bool, float | None]:
        """B-Pref's skip and equal rules on the undiscounted returns: (True, None) to skip,
        (True, 0.5) for equal, (False, None) when the preference model answers."""
        c, m = self.config, self.margin
        if c.skip_eps > 0 and c.skip_eps * m > 0 and not max(ra, rb) > c.skip_eps * m:
            return True, None
        if c.equal_eps > 0 and abs(ra - rb) < c.equal_eps * m:
            return True, 0.5
        return False, None

    def judge_groups(self, a: Sequence[Segment], b: Sequence[Segment]) -> float | None:
        """A group comparison: the same model applied to the groups' mean returns."""
        if self._no_reward((*a, *b)):
            return 0.5
        decided, p = self._relative(
            float(np.mean([self._return(s) for s in a])),
            float(np.mean([self._return(s) for s in b])),
        )
        if decided:
            return p
        return self._answer(
            float(np.mean([self.discounted_return(s) for s in a])),
            float(np.mean([self.discounted_return(s) for s in b])),
        )

    def _answer(self, ra: float, rb: float) -> float | None:
        cfg = self.config
        if cfg.skip_threshold is not None and ra < cfg.skip_threshold and rb < cfg.skip_threshold:
            return None
        if abs(ra - rb) < cfg.equal_threshold:
            return 0.5
        if math.isinf(cfg.beta):
            p_a = 1.0 if ra > rb else 0.0 if rb > ra else 0.5
        else:
            z = cfg.beta * (ra - rb)
            p_a = 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0
        if p_a == 0.5 and math.isinf(cfg.beta):
            choice = 0.5
        else:
            choice = 1.0 if self.rng.random() < p_a else 0.0
        if cfg.epsilon > 0 and choice != 0.5 and self.rng.random() < cfg.epsilon:
            choice = 1.0 - choice
        return choice

    def rank(self, segments: Sequence[Segment]) -> tuple[int, ...] | None:
        """An order of ``segments`` from best to worst, as dense ranks (0 = best, ties share a
        rank), or None to skip: B-Pref's model extended to k segments so that for two it is
        exactly :meth:`judge`.

        Skip: B-Pref's skip rule on the best of the undiscounted returns. Ties: segments whose
        undiscounted returns differ by less than the equal rule's margin (chained along the
        order), and all of them when no step has reward and ``equal_if_no_reward`` is on. Order:
        Plackett–Luce with weights exp(β · discounted return) (β = ∞: sorted by it). Mistake:
        with probability ε the whole order is reversed (for two segments, B-Pref's flip).
        """
        segs = list(segments)
        if len(segs) < 2:
            raise DataError(f"a ranking needs at least 2 segments, got {len(segs)}")
        if self._no_reward(segs):
            return (0,) * len(segs)
        cfg = self.config
        raw = [self._return(s) for s in segs]
        best = max(raw)
        if self._relative(best, best) == (True, None):  # B-Pref's skip: even the best is poor
            return None
        disc = np.array([self.discounted_return(s) for s in segs])
        if cfg.skip_threshold is not None and bool(np.all(disc < cfg.skip_threshold)):
            return None
        if math.isinf(cfg.beta):
            order = [int(i) for i in np.argsort(-disc, kind="stable")]
        else:
            left = list(range(len(segs)))
            order = []
            while left:
                z = cfg.beta * disc[left]
                w = np.exp(z - z.max())
                order.append(left.pop(int(self.rng.choice(len(left), p=w / w.sum()))))
        if cfg.epsilon > 0 and self.rng.random() < cfg.epsilon:
            order.reverse()

        def tied(i: int, j: int) -> bool:
            return (
                self._relative(raw[i], raw[j]) == (True, 0.5)
                or abs(disc[i] - disc[j]) < cfg.equal_threshold
                or (math.isinf(cfg.beta) and disc[i] == disc[j])
            )

        ranks = [0] * len(segs)
        for pos in range(1, len(order)):
            i, j = order[pos - 1], order[pos]
            ranks[j] = ranks[i] + (0 if tied(i, j) else 1)
        return tuple(ranks)

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        for q in queries:
            kind = kind_of(q)
            t0 = now()
            p, meta = kind.simulate(self, q, [segments[s] for s in kind.segment_ids(q)])
            self._pending.add(
                Judgement(
                    id=new_id("j"),
                    query_id=q.id,
                    annotator_id=self.annotator_id,
                    source="synthetic",
                    p=p,
                    created_at=t0,
                    response_time_s=0.0,
                    meta=meta,
                )
            )

    def collect(self) -> list[Judgement]:
        return self._pending.collect()

    # ----- FeedbackSource state ------------------------------------------------------------
    persists = False
    """Judgements are only in memory until the loop stores them."""

    def state(self) -> dict[str, Any]:
        """Generator state and uncollected judgements (JSON-serialisable)."""
        return self._pending.state(self.rng)

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state` (of a source built with the same arguments)."""
        self._pending.load_state(state, self.rng)


@runtime_checkable
class HoldsTeacher(Protocol):
    """A source that asks a teacher of its own (the router, with the teacher as its people): it
    hands over the teacher whose answers depend on B-Pref's margin, so the loop sets its margin
    as it does a teacher's that is the run's source (:func:`margin_teacher_of`)."""

    @property
    def margin_teacher(self) -> SyntheticTeacher | None:
        """The teacher it asks whose skip or equal rule is relative to the margin, or None."""
        ...


def margin_teacher_of(source: object) -> SyntheticTeacher | None:
    """The teacher whose margin the loop sets before each round's queries: ``source`` itself
    when it is a teacher with a relative skip or equal rule (``uses_margin``), the one a source
    that asks a teacher holds (:class:`HoldsTeacher`), else None."""
    if isinstance(source, SyntheticTeacher):
        return source if source.uses_margin else None
    if isinstance(source, HoldsTeacher):
        return source.margin_teacher
    return None

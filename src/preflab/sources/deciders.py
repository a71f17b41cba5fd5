"""Simulated decision makers of paper 000, §5.1: pairwise, groupwise and interactive.

Each decision maker (DM) is both how a person *chooses* what to compare (a Selector) and how
they *answer* (a FeedbackSource), so ``train(..., source=dm, selector=dm)`` runs it.

Answers follow the noisy user model of Eq. 1: the DM perceives every behaviour's return as
R(τ) + ε with ε ~ N(0, noise_std²), drawn afresh for every behaviour of every comparison.

- pair query: a is preferred when its perceived return is higher (p = 1, else 0; 0.5 on an
  exact tie).
- group query: the group with the higher mean perceived return wins (p = 1 or 0).
  **Overlap rule** (explicit and configurable): let *discordance* be the share of the m·n
  cross pairs (i ∈ winner, j ∈ loser) whose perceived returns are ordered against the group
  decision. The comparison is skipped (p = None, "can't tell") when discordance exceeds
  ``max_discordance``; 0 skips any overlap at all, 1 never skips. A pair has discordance 0,
  so the rule never skips pairs. ``overlap_rule="border"`` is the rule of the paper's released
  code instead: with the border at the midpoint of the two perceived means, the comparison is
  skipped when more than half of either group is perceived on the wrong side of it.
- group editing (``clean_groups``, as the released code's simulated user does): before
  answering, members perceived on the wrong side of the border are removed from their group,
  and the answer is about the edited groups (done while the comparison is chosen, so the query
  the loop stores names the edited groups).

Counters (``dm.stats``): comparisons answered, skipped, labels produced (a group judgement is
expanded exactly as every aggregator expands it, by the group kind's label rule), label errors
(labels whose preferred side has the lower *true* return; true ties are not errors) and
judgement errors (the preferred side has the lower true mean return).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds import GROUP, GROUP_LIMIT, kind_of
from preflab.records import Judgement, Query, Segment, new_id
from preflab.reward.protocol import RewardModel
from preflab.selection.groupwise import GroupwiseConfig, GroupwiseSelector, candidate_groups
from preflab.selection.selectors import DisagreementSelector, Selector
from preflab.sources.immediate import PendingJudgements

DMKind = Literal["pairwise", "groupwise", "interactive"]
DM_KINDS: tuple[str, ...] = ("pairwise", "groupwise", "interactive")


@dataclass(frozen=True, kw_only=True)
class DecisionConfig:
    """How a simulated decision maker perceives and answers."""

    noise_std: float = 0.0
    """σ of the perception noise ε of Eq. 1, in units of segment return."""
    max_discordance: float = 0.25
    """Overlap rule: skip a group comparison when more than this share of its cross pairs is
    perceived against the group decision (0 = skip any overlap, 1 = never skip)."""

    overlap_rule: Literal["discordance", "border"] = "discordance"
    """Which overlap rule skips a group comparison: 'discordance' (``max_discordance``) or
    'border' (more than half of either group perceived beyond the midpoint of the two means)."""
    clean_groups: bool = False
    """Remove the members perceived on the wrong side of the border before answering."""

    def __post_init__(self) -> None:
        if self.overlap_rule not in ("discordance", "border"):
            raise ConfigError(
                f"overlap_rule must be 'discordance' or 'border', got {self.overlap_rule!r}"
            )
        if not self.noise_std >= 0:
            raise ConfigError(f"noise_std must be ≥ 0, got {self.noise_std}")
        if not 0.0 <= self.max_discordance <= 1.0:
            raise ConfigError(f"max_discordance must be in [0, 1], got {self.max_discordance}")


@dataclass
class DecisionStats:
    """What a decision maker produced so far."""

    comparisons: int = 0
    """Queries answered with a preference."""
    skipped: int = 0
    """Queries skipped by the overlap rule."""
    labels: int = 0
    """Pairwise labels its answers expand to."""
    label_errors: int = 0
    """Labels whose preferred behaviour has the lower true return."""
    judgement_errors: int = 0
    """Answers whose preferred side has the lower true mean return."""

    @property
    def label_error_rate(self) -> float:
        return self.label_errors / self.labels if self.labels else float("nan")

    def as_dict(self) -> dict[str, float]:
        return {
            "comparisons": self.comparisons,
            "skipped": self.skipped,
            "labels": self.labels,
            "label_errors": self.label_errors,
            "judgement_errors": self.judgement_errors,
            "label_error_rate": self.label_error_rate,
        }


def decide(
    returns_a: np.ndarray, returns_b: np.ndarray, config: DecisionConfig, rng: np.random.Generator
) -> tuple[float | None, float]:
    """One noisy answer (Eq. 1) about the true returns of sides a and b.

    Returns (p or None when skipped by the overlap rule, discordance).
    """
    p, disc, _keep_a, _keep_b = decide_groups(returns_a, returns_b, config, rng)
    return p, disc


def decide_groups(
    returns_a: np.ndarray, returns_b: np.ndarray, config: DecisionConfig, rng: np.random.Generator
) -> tuple[float | None, float, np.ndarray, np.ndarray]:
    """:func:`decide` plus which members are kept: (p, discordance, keep_a, keep_b).

    The masks are all True unless ``config.clean_groups`` removes members perceived on the
    wrong side of the border (the midpoint of the two perceived means).
    """
    ra = np.asarray(returns_a, dtype=np.float64)
    rb = np.asarray(returns_b, dtype=np.float64)
    if ra.size == 0 or rb.size == 0:
        raise DataError("both sides of a comparison need at least one behaviour")
    if config.noise_std > 0:  # Eq. 1: every behaviour perceived with its own ε
        ra = ra + rng.normal(0.0, config.noise_std, ra.shape)
        rb = rb + rng.normal(0.0, config.noise_std, rb.shape)
    all_a, all_b = np.ones(ra.size, dtype=bool), np.ones(rb.size, dtype=bool)
    ma, mb = ra.mean(), rb.mean()
    if ma == mb:
        return 0.5, 0.0, all_a, all_b
    win, lose = (ra, rb) if ma > mb else (rb, ra)
    discordance = float((win[:, None] < lose[None, :]).mean())
    border = (ma + mb) / 2
    wrong_win, wrong_lose = win < border, lose > border
    if len(ra) * len(rb) > 1:
        if config.overlap_rule == "discordance":
            skip = discordance > config.max_discordance
        else:  # released code: more than half of either group beyond the border
            skip = wrong_win.sum() > win.size / 2 or wrong_lose.sum() > lose.size / 2
        if skip:
            return None, discordance, all_a, all_b
    if config.clean_groups:
        keep_win, keep_lose = ~wrong_win, ~wrong_lose
        all_a, all_b = (keep_win, keep_lose) if ma > mb else (keep_lose, keep_win)
    return (1.0 if ma > mb else 0.0), discordance, all_a, all_b


@dataclass(frozen=True, kw_only=True)
class InteractiveSelector:
    """Groups chosen as a person exploring the tree would (paper 000, §5.1, INTERACTIVE-DM).

    The person sees the behaviours (here: their returns as perceived with ``noise_std``;
    never the reward model), so the comparisons are spread evenly over the range of group mean returns: for each query a
    target level is drawn in its own stratum of [lowest + gap, highest] (stratified), group A
    is the unused tree group whose mean is closest to it and group B the unused disjoint group
    whose mean is closest to mean(A) − gap, with gap = ``gap_frac`` × the range of group means.
    Consecutive strata chain the comparisons from the worst behaviours to the best.

    A group may be used in at most ``groups.max_node_uses`` comparisons of one call (a person
    may compare a group again, against another one, when the budget asks for more comparisons
    than there are groups).

    Edits (as the person would in the comparison view): each tree group (≤ ``groups.max_size``)
    is made return-homogeneous by removing, one at a time, the member farthest from the group's
    median return until the group's return spread is at most ``max_spread_frac`` × the range of
    returns; a group that would fall below ``groups.min_size`` is dropped, and edited groups
    that coincide are kept once.
    """

    groups: GroupwiseConfig = field(default_factory=GroupwiseConfig)
    """Tree options (the groups are the same tree nodes the groupwise selector uses)."""
    gap_frac: float = 0.15
    """Target difference of the two groups' mean returns, as a share of the range."""
    max_spread_frac: float = 0.2
    """Largest return spread (max − min) kept inside a group, as a share of the range of
    returns of the candidates; 1 keeps the tree groups unedited."""
    noise_std: float = 0.0
    """σ of the person's perception (Eq. 1): the returns the person edits and chooses groups
    by are R(τ) + ε, drawn once per selection from the selection's RNG (the decision maker
    passes its own ``noise_std``; 0 = the true returns)."""

    def __post_init__(self) -> None:
        if not (np.isfinite(self.noise_std) and self.noise_std >= 0):
            raise ConfigError(f"noise_std must be finite and ≥ 0, got {self.noise_std}")
        if not 0.0 < self.gap_frac < 1.0:
            raise ConfigError(f"gap_frac must be in (0, 1), got {self.gap_frac}")
        if not 0.0 <= self.max_spread_frac <= 1.0:
            raise ConfigError(f"max_spread_frac must be in [0, 1], got {self.max_spread_frac}")

    def edit_groups(
        self, groups: Sequence[tuple[int, ...]], returns: np.ndarray
    ) -> list[tuple[int, ...]]:
        """Return-homogeneous versions of ``groups`` (rows into ``returns``); see the class doc."""
        span = float(returns.max() - returns.min()) if len(returns) else 0.0
        limit = self.max_spread_frac * span
        out: list[tuple[int, ...]] = []
        seen: set[tuple[int, ...]] = set()
        for g in groups:
            rows = list(g)[: self.groups.max_size]
            while len(rows) >= self.groups.min_size:
                r = returns[rows]
                if float(r.max() - r.min()) <= limit + 1e-12:
                    break
                rows.pop(int(np.argmax(np.abs(r - np.median(r)))))
            key = tuple(sorted(rows))
            if len(rows) >= self.groups.min_size and key not in seen:
                seen.add(key)
                out.append(key)
        return out

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        groups = candidate_groups(candidates, n_queries, self.groups)
        if len(groups) < 2:  # nothing to ask (or nothing asked): no noise drawn
            return []
        ret = np.array([s.true_return for s in candidates], dtype=np.float64)
        if self.noise_std > 0:  # what the person perceives, not the true returns
            ret = ret + rng.normal(0.0, self.noise_std, ret.shape)
        groups = self.edit_groups(groups, ret)
        if len(groups) < 2:
            return []
        mu = np.array([ret[list(g)].mean() for g in groups])
        lo, hi = float(mu.min()), float(mu.max())
        gap = self.gap_frac * (hi - lo)
        sets = [set(g) for g in groups]
        uses = np.zeros(len(groups), dtype=np.int64)
        asked: set[tuple[int, int]] = set()
        out: list[Query] = []
        strata = rng.permutation(n_queries)
        for q in strata:
            target = lo + gap + (hi - lo - gap) * (q + rng.random()) / n_queries
            free = np.flatnonzero(uses < self.groups.max_node_uses)
            if len(free) < 2:
                break
            ia = int(free[np.argmin(np.abs(mu[free] - target) + 1e-9 * rng.random(len(free)))])
            cand = [
                int(j)
                for j in free
                if j != ia
                and not (sets[j] & sets[ia])
                and mu[j] <= mu[ia]
                and (ia, int(j)) not in asked
            ]
            if not cand:
                continue
            cj = np.array(cand)
            ib = int(cj[np.argmin(np.abs(mu[cj] - (mu[ia] - gap)) + 1e-9 * rng.random(len(cj)))])
            uses[ia] += 1
            uses[ib] += 1
            asked.add((ia, ib))
            a, b = (ia, ib) if rng.random() < 0.5 else (ib, ia)
            out.append(
                Query(
                    id=new_id("q"),
                    kind=GROUP.name,
                    a=tuple(candidates[r].id for r in groups[a]),
                    b=tuple(candidates[r].id for r in groups[b]),
                    round=round,
                    meta={"selector": "interactive", "target": float(target)},
                )
            )
        return out


class DecisionMaker:
    """A simulated person: a Selector (what to compare) and a FeedbackSource (the answers).

    ``kind`` picks the selection of §5.1: 'pairwise' (the max-variance pairs,
    :class:`preflab.selection.selectors.DisagreementSelector`), 'groupwise' (max s_g,
    :class:`GroupwiseSelector`) or 'interactive' (:class:`InteractiveSelector`). Any
    selector may be passed instead. Answers follow Eq. 1 and the overlap rule (module doc).

    ``max_group_size`` bounds the groups (the paper's 8); ``max_group_uses`` is how many
    comparisons of one round may use the same group; ``oversample`` is how many suggestions
    per wanted comparison a group decision maker looks at. ``skips_use_budget`` (default, as
    paper 000's label counts suggest): a comparison the person looked at and could not decide
    counts toward the round's ``n_queries``; False replaces it by the next suggestion.
    """

    def __init__(
        self,
        kind: DMKind | str,
        config: DecisionConfig | None = None,
        *,
        rng: np.random.Generator,
        selector: Selector | None = None,
        annotator_id: str | None = None,
        max_group_size: int = GROUP_LIMIT,
        max_group_uses: int = 1,
        oversample: int = 3,
        skips_use_budget: bool = True,
    ) -> None:
        if kind not in DM_KINDS:
            raise ConfigError(f"decision maker kind must be one of {DM_KINDS}, got {kind!r}")
        self.kind = kind
        self.config = config or DecisionConfig()
        self.rng = rng
        if oversample < 1:
            raise ConfigError(f"oversample must be ≥ 1, got {oversample}")
        self.oversample = oversample
        self.skips_use_budget = skips_use_budget
        self.annotator_id = annotator_id or f"dm-{kind}"
        gcfg = GroupwiseConfig(max_size=max_group_size, max_node_uses=max_group_uses)
        if selector is not None:
            self.selector: Selector = selector
        elif kind == "pairwise":
            self.selector = DisagreementSelector()
        elif kind == "groupwise":
            self.selector = GroupwiseSelector(config=gcfg)
        else:
            self.selector = InteractiveSelector(groups=gcfg, noise_std=self.config.noise_std)
        self.stats = DecisionStats()
        self._pending = PendingJudgements("decision_maker")
        # comparisons already looked at while choosing (a, b) -> (p, discordance); p None: skip
        self._decided: dict[
            tuple[tuple[str, ...], tuple[str, ...]], tuple[float | None, float]
        ] = {}

    # ----- Selector ----------------------------------------------------------------------
    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        """What this person chooses to compare (delegates to its selector).

        A group comparison is looked at as it is set up: one the person cannot decide (the
        overlap rule skips it) is counted in ``stats.skipped``; with ``skips_use_budget`` it
        is returned and answered "can't tell" (a judgement with p = None, no label), so it is
        one of the ``n_queries`` comparisons and the loop, which counts the queries it asked,
        does not ask for it again in a later round; otherwise it is replaced by the selector's
        next suggestion (it asks ``oversample`` × ``n_queries``). The answer they settled on is the one :meth:`submit` gives (one
        perception per comparison, Eq. 1). Pairs are never skipped and are passed through."""
        if isinstance(self.selector, DisagreementSelector) or n_queries <= 0:
            return self.selector.select(candidates, ensemble, n_queries, rng, round=round)
        ret = {s.id: s.true_return for s in candidates}
        out: list[Query] = []
        asked = self.selector.select(
            candidates, ensemble, self.oversample * n_queries, rng, round=round
        )
        used = 0  # comparisons of this round's budget: answered ones, and skips if they count
        for q in asked:
            if used == n_queries:
                break
            if kind_of(q).as_pair(q) is not None:  # a single pair: nothing to decide on groups
                out.append(q)
                used += 1
                continue
            ra = np.array([ret[x] for x in q.a])
            rb = np.array([ret[x] for x in q.b])
            p, disc, keep_a, keep_b = decide_groups(ra, rb, self.config, self.rng)
            if p is None and not self.skips_use_budget:  # replaced by the next suggestion
                self.stats.skipped += 1
                continue
            if p is None:  # asked and answered "can't tell" (p = None): one of the budget's
                if (q.a, q.b) in self._decided:
                    continue
                self._decided[(q.a, q.b)] = (None, disc)
                out.append(q)
                used += 1
                continue
            if not (keep_a.all() and keep_b.all()):  # edited before answering
                a = tuple(x for x, k in zip(q.a, keep_a, strict=True) if k)
                b = tuple(x for x, k in zip(q.b, keep_b, strict=True) if k)
                q = dataclasses.replace(q, a=a, b=b, meta={**q.meta, "edited": True})
            if (q.a, q.b) in self._decided:  # the same two groups after editing
                continue
            self._decided[(q.a, q.b)] = (p, disc)
            out.append(q)
            used += 1
        return out

    # ----- FeedbackSource ----------------------------------------------------------------
    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        """Answer every pair or group query at once (skips are judgements with p = None)."""
        for q in queries:
            if not q.b:
                raise DataError(
                    "a decision maker compares two sides (pair and group queries), got a "
                    f"{kind_of(q).title} ({q.id})"
                )
            missing = [s for s in (*q.a, *q.b) if s not in segments]
            if missing:
                raise DataError(
                    f"query {q.id} names segment(s) not passed to submit: {missing[:3]}"
                )
        for q in queries:
            ra = np.array([segments[s].true_return for s in q.a])
            rb = np.array([segments[s].true_return for s in q.b])
            settled = self._decided.pop((q.a, q.b), None)
            p, disc = settled if settled is not None else decide(ra, rb, self.config, self.rng)
            j = Judgement(
                id=new_id("j"),
                query_id=q.id,
                annotator_id=self.annotator_id,
                source="synthetic",
                p=p,
                meta={"discordance": disc, "dm": self.kind},
            )
            self._pending.add(j)
            if p is None:
                self.stats.skipped += 1
                continue
            self.stats.comparisons += 1
            if (p > 0.5 and ra.mean() < rb.mean()) or (p < 0.5 and ra.mean() > rb.mean()):
                self.stats.judgement_errors += 1
            for lab in kind_of(q).labels(q, j):
                self.stats.labels += 1
                da = segments[lab.a].true_return - segments[lab.b].true_return
                if (lab.p > 0.5 and da < 0) or (lab.p < 0.5 and da > 0):
                    self.stats.label_errors += 1

    def collect(self) -> list[Judgement]:
        """Judgements since the last call."""
        return self._pending.collect()

    # ----- FeedbackSource state ------------------------------------------------------------
    persists = False
    """Judgements are only in memory until the loop stores them."""

    def state(self) -> dict[str, Any]:
        """Generator state, counters and uncollected judgements (JSON-serialisable)."""
        return {
            **self._pending.state(self.rng, stats=dataclasses.asdict(self.stats)),
            "decided": [[list(a), list(b), p, d] for (a, b), (p, d) in self._decided.items()],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state` (of a decision maker built with the same arguments)."""
        self._pending.load_state(state, self.rng, ("stats",))
        self.stats = DecisionStats(**state["stats"])
        self._decided = {
            (tuple(a), tuple(b)): (None if p is None else float(p), float(d))
            for a, b, p, d in state.get("decided", [])
        }

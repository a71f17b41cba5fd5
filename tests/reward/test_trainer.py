"""The trainer evaluates each member's distinct segments once per minibatch (issue #11, part 5)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from preflab.errors import ConfigError
from preflab.reward import (
    FitConfig,
    LabelBatch,
    RewardConfig,
    RewardEnsemble,
    RewardTrainer,
    SegmentBatch,
)
from preflab.reward.trainer import member_returns, unique_rows


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        np.int64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=12),
        elements=st.integers(0, 9),
    )
)
def test_unique_rows_rebuilds_every_row_from_its_distinct_values(rows: np.ndarray) -> None:
    t = torch.from_numpy(rows)
    uniq, inv = unique_rows(t)
    assert torch.equal(torch.gather(uniq, 1, inv), t)
    widest = max(len(set(r.tolist())) for r in rows)
    assert uniq.shape == (rows.shape[0], widest)
    for m, r in enumerate(rows):
        assert set(uniq[m].tolist()) == set(r.tolist())  # padding repeats a value of its own row


def test_member_returns_equal_evaluating_every_repeat() -> None:
    """Returns and gradients match the naive evaluation of all 2B rows, repeats included."""
    rng = np.random.default_rng(3)
    obs = rng.normal(size=(12, 7, 3)).astype(np.float32)
    acts = rng.normal(size=(12, 7, 2)).astype(np.float32)
    segments = SegmentBatch.from_arrays(obs, acts)
    rows = torch.from_numpy(rng.integers(0, 12, size=(3, 20)))  # many repeats per member
    assert any(len(set(r.tolist())) < 20 for r in rows)

    def grads(fn) -> tuple[torch.Tensor, list[torch.Tensor]]:
        ens = RewardEnsemble(3, 2, RewardConfig(members=3, hidden=(8, 8)), seed=0)
        ret = fn(ens)
        weights = torch.from_numpy(rng.normal(size=ret.shape).astype(np.float32))
        (ret * weights).sum().backward()
        return ret.detach(), [p.grad.clone() for p in ens.parameters()]

    state = rng.bit_generator.state
    got, got_g = grads(lambda ens: member_returns(ens, segments, rows))
    rng.bit_generator.state = state  # the same loss weights for both

    def naive(ens: RewardEnsemble) -> torch.Tensor:
        r = ens.forward_members(segments.obs[rows], segments.acts[rows])
        return (r * segments.mask[rows]).sum(-1)

    want, want_g = grads(naive)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_g, want_g, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)


def test_members_on_their_own_rows_equal_each_member_on_shared_rows() -> None:
    """The training path (one addmm chain per member) is the inference path (batched) per member."""
    ens = RewardEnsemble(4, 0, RewardConfig(members=3, hidden=(8, 6), use_actions=False), seed=1)
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(3, 11, 4)).astype(np.float32))
    per_member = ens.net(x)  # (3, 11): member m on x[m]
    assert per_member.shape == (3, 11)
    for m in range(3):
        torch.testing.assert_close(per_member[m], ens.net(x[m])[m])


@pytest.mark.parametrize(
    ("warm_min_steps", "warm"), [(None, True), (0, False), (0, True), (7, True)]
)
def test_step_floor_of_cold_and_warm_fits(warm_min_steps: int | None, warm: bool) -> None:
    """40 labels in batches of 16 are 3 steps per epoch: 2 epochs are 6 steps, under the floor
    of 50 (17 epochs, 51 steps); a warm fit uses warm_min_steps as its floor when it is set."""
    rng = np.random.default_rng(0)
    segments = SegmentBatch.from_arrays(rng.normal(size=(20, 5, 2)).astype(np.float32))
    a = rng.integers(0, 20, 40)
    labels = LabelBatch.from_arrays(a, (a + 1) % 20, rng.uniform(size=40))
    ens = RewardEnsemble(2, 0, RewardConfig(use_actions=False, members=2, hidden=(4,)), seed=0)
    cfg = FitConfig(epochs=2, batch_size=16, min_steps=50, warm_min_steps=warm_min_steps)
    report = RewardTrainer(ens, cfg).fit(segments, labels, rng, warm=warm)
    floor = 50 if not warm or warm_min_steps is None else warm_min_steps
    assert report.steps == 3 * max(2, -(-floor // 3))


def test_negative_step_floors_are_refused() -> None:
    with pytest.raises(ConfigError, match="warm_min_steps"):
        FitConfig(warm_min_steps=-1)
    with pytest.raises(ConfigError, match="min_steps"):
        FitConfig(min_steps=-5)


def test_a_label_is_right_when_the_member_takes_its_side_and_an_equal_answer_never_is() -> None:
    from preflab.reward.trainer import _agrees

    ret_a = torch.tensor([[2.0, 0.0, 1.0, 1.0, 3.0]])
    ret_b = torch.tensor([[1.0, 1.0, 1.0, 0.0, 3.0]])
    p = torch.tensor([[1.0, 0.2, 1.0, 0.5, 0.0]])
    # a > b with p = 1: right; a < b with p = 0.2: right; a tie: no side; p = 0.5: no side;
    # a tie with p = 0: no side
    assert _agrees(ret_a, ret_b, p).tolist() == [[1.0, 1.0, 0.0, 0.0, 0.0]]


def _first_coordinate_labels(seed: int, n: int, p_of: str) -> tuple:
    """60 segments whose true return is the sum of the first observation coordinate, and ``n``
    labels: by that return (``p_of="return"``), every one 0.5 ("equal"), or each pair twice
    with opposite answers ("both")."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(60, 8, 3)).astype(np.float32)
    ret = obs[:, :, 0].sum(1)
    a = rng.integers(0, 60, n)
    b = (a + rng.integers(1, 60, n)) % 60
    if p_of == "both":
        a, b = np.concatenate([a, a]), np.concatenate([b, b])
        p = np.concatenate([np.ones(n), np.zeros(n)])
    else:
        p = (ret[a] > ret[b]).astype(float) if p_of == "return" else np.full(n, 0.5)
    return rng, SegmentBatch.from_arrays(obs), LabelBatch.from_arrays(a, b, p), ret


def _fit_with(stop: float | None, p_of: str) -> tuple:
    rng, seg, labels, _ret = _first_coordinate_labels(5, 200, p_of)
    ens = RewardEnsemble(3, 0, RewardConfig(use_actions=False, members=3, hidden=(16,)), seed=5)
    cfg = FitConfig(
        epochs=60,
        batch_size=64,
        stop_accuracy=stop,
        bootstrap=False,
        holdout=0.0,
        adapt_l2=False,
        random_answer=0.0,
    )
    return RewardTrainer(ens, cfg).fit(seg, labels, rng), ens, seg, labels


def test_stop_accuracy_ends_a_learnable_fit_early_once_the_members_take_the_labels_sides() -> None:
    """B-Pref's stop: a fit on labels a linear reward explains ends long before its 60 epochs
    (each of 4 steps); the members then rank ≥ 90% of the label pairs as labelled (counted
    here on the fitted model, independently of the trainer's running count)."""
    report, ens, seg, labels = _fit_with(0.95, "return")
    assert report.epochs < 60 and report.steps == 4 * report.epochs
    with torch.no_grad():
        r = ens.segment_returns_t(seg).numpy()  # (members, segments)
    a, b, p = labels.a.numpy(), labels.b.numpy(), labels.p.numpy()
    agree = ((r[:, a] > r[:, b]) == (p > 0.5)).mean(1)
    assert agree.mean() >= 0.9
    assert _fit_with(None, "return")[0].epochs == 60


@pytest.mark.parametrize("p_of", ["equal", "both"])
def test_labels_no_model_can_take_the_side_of_never_stop_the_fit(p_of: str) -> None:
    """Equal answers never count as right, and a pair answered both ways is right at most once:
    the accuracy stays ≤ 0.5, so a stop at 0.6 never comes and every epoch runs."""
    assert _fit_with(0.6, p_of)[0].epochs == 60


@pytest.mark.parametrize("value", [0.0, 1.0, 1.5, -0.2])
def test_stop_accuracy_outside_0_1_is_refused(value: float) -> None:
    with pytest.raises(ConfigError, match="stop_accuracy"):
        FitConfig(stop_accuracy=value)


def test_stop_accuracy_ends_the_fit_after_the_first_epoch_above_0_97() -> None:
    """B-Pref's stop at 0.97, epoch by epoch. With one batch of every label per epoch, epoch e's
    training accuracy is that of the model after e − 1 steps. Those models are rebuilt here as
    fits of k = 1, 2, … epochs without the stop (same seeds), and their accuracy is counted on
    the labels directly (each member's share of pairs ranked as labelled, averaged over the
    members). The stopped fit must run exactly to the first epoch whose model was above 0.97, and
    end with that epoch's weights."""

    def fit(epochs: int, stop: float | None) -> tuple:
        rng, seg, labels, _ret = _first_coordinate_labels(11, 120, "return")
        ens = RewardEnsemble(3, 0, RewardConfig(use_actions=False, members=3, hidden=(16,)), seed=4)
        cfg = FitConfig(
            epochs=epochs,
            batch_size=120,
            lr=5e-2,
            min_steps=0,
            stop_accuracy=stop,
            bootstrap=False,
            holdout=0.0,
            adapt_l2=False,
            random_answer=0.0,
        )
        report = RewardTrainer(ens, cfg).fit(seg, labels, rng)
        return report, ens, seg, labels

    def accuracy(ens: RewardEnsemble, seg: SegmentBatch, labels: LabelBatch) -> float:
        with torch.no_grad():
            r = ens.segment_returns_t(seg).numpy()
        a, b, p = labels.a.numpy(), labels.b.numpy(), labels.p.numpy()
        return float(((r[:, a] > r[:, b]) == (p > 0.5)).mean(1).mean())

    _rep, _ens, seg, labels = fit(1, None)
    fresh = RewardEnsemble(3, 0, RewardConfig(use_actions=False, members=3, hidden=(16,)), seed=4)
    fresh.fit_input_stats(seg)  # the model before the first step
    accs = [accuracy(fresh, seg, labels)]
    while accs[-1] <= 0.97:
        assert len(accs) < 40, "the problem should be learnable within 40 steps"
        _rep, ens, _s, _l = fit(len(accs), None)  # the model after len(accs) steps
        accs.append(accuracy(ens, seg, labels))
    first_above = len(accs)  # epoch e sees the model after e − 1 steps: accs[e − 1] > 0.97
    assert first_above > 1
    report, stopped, _s, _l = fit(200, 0.97)
    assert report.epochs == report.steps == first_above
    _rep, after, _s, _l = fit(first_above, None)  # the stopped fit's last step is its step e
    for k, v in after.state_dict().items():
        assert torch.equal(v, stopped.state_dict()[k])


def test_l2_adapts_on_train_and_validation_losses_of_the_model_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Christiano et al. keep the validation loss within 1.1–1.5 × the training loss by ℓ2.
    With dropout, the epoch's running training loss (dropout on) is above the model's own, so
    the ratio fell below the band and ℓ2 only shrank. Each adjustment must read both losses of
    the model in eval mode: checked against Bradley–Terry with the random-answer term written
    out here, on each member's own split."""
    rng = np.random.default_rng(0)
    n, t, d = 120, 10, 5
    obs = rng.normal(size=(n, t, d)).astype(np.float32)
    ret = (obs @ rng.normal(size=d)).sum(1)
    a = rng.integers(0, n, 200)
    b = (a + rng.integers(1, n, 200)) % n
    segs = SegmentBatch.from_arrays(obs)
    labels = LabelBatch.from_arrays(a, b, (ret[a] > ret[b]).astype(np.float32))
    ens = RewardEnsemble(d, 0, RewardConfig(members=3, dropout=0.5, use_actions=False), seed=0)
    trainer = RewardTrainer(ens, FitConfig(epochs=20, l2_init=1e-3))
    splits: list = []
    real_split = trainer._split
    monkeypatch.setattr(
        trainer, "_split", lambda k, r: splits.append(real_split(k, r)) or splits[-1]
    )
    seen: list[tuple[list[float], list[float], list[float]]] = []
    real_adapt = trainer._adapt_l2

    def adapt(tr: list[float], va: list[float]) -> None:
        was = ens.training
        ens.eval()
        with torch.no_grad():
            r = ens.segment_returns_t(segs)
        ens.train(was)
        p = labels.p
        prob = 0.9 * torch.sigmoid(r[:, labels.a] - r[:, labels.b]) + 0.05
        per = -(p * torch.log(prob) + (1 - p) * torch.log(1 - prob))
        want_tr = [float(per[m, tt].mean()) for m, (tt, _v) in enumerate(splits[-1])]
        want_va = [float(per[m, vv].mean()) for m, (_t, vv) in enumerate(splits[-1])]
        seen.append((tr, va, want_tr + want_va))
        real_adapt(tr, va)

    monkeypatch.setattr(trainer, "_adapt_l2", adapt)
    trainer.fit(segs, labels, np.random.default_rng(1))
    assert len(seen) == 5  # about five adjustments per fit
    for tr, va, want in seen:
        np.testing.assert_allclose(tr + va, want, rtol=1e-5)

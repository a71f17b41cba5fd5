"""REED's dynamics-aware pre-training (issue #59, item 4): NT-Xent against hand-derived values,
the representations it compares, the transitions it reads, and what pre-training moves."""

import math

import numpy as np
import pytest
import torch

from preflab.config import TrainConfig
from preflab.errors import ConfigError, DataError
from preflab.reward import FitConfig, RewardConfig, RewardEnsemble, RewardTrainer, SegmentBatch
from preflab.reward.reed import ReedConfig, ReedHeads, nt_xent, reed_pretrain, segment_transitions
from preflab.testing.factories import make_segments

E1, E2 = [1.0, 0.0], [0.0, 1.0]


def test_nt_xent_of_orthogonal_pairs() -> None:
    """u = (e1, e2), v = (e1, e2), τ = 1: every vector has cosine 1 with its partner and 0 with
    the other two, so each term is −ln(e / (e + 2)) = ln(1 + 2/e)."""
    u = torch.tensor([[E1, E2]])
    got = nt_xent(u, u.clone(), temperature=1.0)
    assert got.shape == (1,)
    assert float(got[0]) == pytest.approx(math.log(1 + 2 / math.e), rel=1e-6)


def test_nt_xent_with_a_confusable_negative_and_a_temperature() -> None:
    """u = (e1, e1), v = (e1, e2), τ = ½, vectors w = (e1, e1, e1, e2), logits cos/τ ∈ {2, 0}:
    w0 (partner w2): logits 2 (w1), 2 (w2), 0 (w3) → −ln(e²/(2e² + 1));
    w1 (partner w3): 2, 2, 0 at the partner → ln(2e² + 1);
    w2 (partner w0): as w0; w3 (partner w1): 0, 0, 0 → ln 3. The loss is the mean of the four;
    scaling u does not change it (cosines)."""
    u = torch.tensor([[E1, E1]])
    v = torch.tensor([[E1, E2]])
    z = math.log(2 * math.e**2 + 1)
    want = (2 * (z - 2) + z + math.log(3)) / 4
    assert float(nt_xent(u, v, 0.5)[0]) == pytest.approx(want, rel=1e-6)
    assert float(nt_xent(5 * u, v, 0.5)[0]) == pytest.approx(want, rel=1e-6)


def test_nt_xent_is_per_member() -> None:
    """A leading member axis gives one loss per member, each as if alone."""
    a, b = torch.tensor([[E1, E2]]), torch.tensor([[E1, E1]])
    both = nt_xent(torch.cat([a, b]), torch.cat([a, torch.tensor([[E1, E2]])]), 1.0)
    assert float(both[0]) == pytest.approx(float(nt_xent(a, a, 1.0)[0]))
    assert float(both[1]) == pytest.approx(float(nt_xent(b, torch.tensor([[E1, E2]]), 1.0)[0]))


def _tiny(use_actions: bool = True) -> RewardEnsemble:
    """One member, obs 2, act 1, hidden (2,), ReLU, weights set by hand."""
    ens = RewardEnsemble(
        2, 1, RewardConfig(members=1, hidden=(2,), activation="relu", use_actions=use_actions)
    )
    with torch.no_grad():
        rows = 3 if use_actions else 2
        w0 = torch.tensor([[1.0, -1.0], [2.0, 0.5], [10.0, -10.0]])[:rows]
        ens.weights[0].copy_(w0[None])
        ens.biases[0].copy_(torch.tensor([[[0.5, 0.0]]]))
        ens.weights[1].copy_(torch.tensor([[[3.0], [-1.0]]]))
        ens.biases[1].copy_(torch.tensor([[[0.25]]]))
        ens.in_mean.copy_(torch.tensor([1.0, 0.0, 0.0][:rows]))
        ens.in_std.copy_(torch.tensor([2.0, 1.0, 1.0][:rows]))
    return ens


def test_state_features_read_only_the_state_columns_of_the_first_layer() -> None:
    """s = (3, 1): s̃ = ((3 − 1)/2, 1/1) = (1, 1); W₀ˢ = [[1, −1], [2, 0.5]], b₀ = (0.5, 0):
    s̃·W₀ˢ + b₀ = (1 + 2 + 0.5, −1 + 0.5) = (3.5, −0.5), ReLU → (3.5, 0). The action's row
    (10, −10) plays no part."""
    ens = _tiny()
    got = ens.state_features(torch.tensor([[[3.0, 1.0]]]))
    torch.testing.assert_close(got, torch.tensor([[[3.5, 0.0]]]))


def test_hidden_features_are_what_the_output_layer_reads() -> None:
    """s = (3, 1), a = 0.1: x = (1, 1, 0.1), x·W₀ + b₀ = (3.5 + 1, −0.5 − 1) = (4.5, −1.5),
    ReLU → (4.5, 0); the reward is 3·4.5 − 0 + 0.25 = 13.75."""
    ens = _tiny()
    obs, acts = torch.tensor([[[3.0, 1.0]]]), torch.tensor([[[0.1]]])
    torch.testing.assert_close(ens.hidden_features(obs, acts), torch.tensor([[[4.5, 0.0]]]))
    assert float(ens.forward_members(obs[:, :, None], acts[:, :, None]).detach()[0, 0, 0]) == (
        pytest.approx(13.75)
    )


def test_segment_transitions_pair_consecutive_real_steps_only() -> None:
    """Segments of 3 and 2 real steps (the second padded to 3): 2 + 1 transitions; the padded
    step never appears as a next state."""
    rng = np.random.default_rng(0)
    segs = [*make_segments(1, rng=rng, length=3), *make_segments(1, rng=rng, length=2)]
    short = segs[1]
    batch = SegmentBatch.from_segments([segs[0], short])
    obs, acts, nxt = segment_transitions(batch)
    assert obs.shape == (3, 2) and acts.shape == (3, 1) and nxt.shape == (3, 2)
    np.testing.assert_allclose(obs, np.concatenate([segs[0].obs[:2], short.obs[:1]]))
    np.testing.assert_allclose(nxt, np.concatenate([segs[0].obs[1:], short.obs[1:]]))
    np.testing.assert_allclose(acts, np.concatenate([segs[0].acts[:2], short.acts[:1]]))


def _toy_transitions(n: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear dynamics s' = s + 0.5·[a, −a, a] (3-d state, 1-d action)."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    acts = rng.uniform(-1, 1, size=(n, 1)).astype(np.float32)
    nxt = obs + 0.5 * np.concatenate([acts, -acts, acts], axis=1)
    return obs, acts, nxt.astype(np.float32)


def _pretrain(seed: int, steps: int = 150) -> tuple[RewardEnsemble, ReedHeads, list[float]]:
    obs, acts, nxt = _toy_transitions()
    ens = RewardEnsemble(3, 1, RewardConfig(members=2, hidden=(16, 16)), seed=1)
    batch = SegmentBatch(
        ids=tuple(map(str, range(len(obs)))),
        obs=torch.from_numpy(obs)[:, None],
        acts=torch.from_numpy(acts)[:, None],
        mask=torch.ones(len(obs), 1),
    )
    ens.fit_input_stats(batch)
    gen = torch.Generator().manual_seed(seed)
    heads = ReedHeads(ens, 8, gen)
    cfg = ReedConfig(on=True, steps=steps, batch_size=32, optimizer="adam", lr=3e-3)
    return ens, heads, reed_pretrain(ens, heads, obs, acts, nxt, cfg, gen)


def test_pretraining_lowers_the_loss_and_leaves_the_reward_layer_alone() -> None:
    """On linear dynamics 150 steps lower the contrastive loss (last 20 steps' mean below the
    first 5's by a tenth); the hidden layers moved, the output layer (the reward head REED's
    representation network does not have) did not; a second run from the same seed repeats it."""
    before = RewardEnsemble(3, 1, RewardConfig(members=2, hidden=(16, 16)), seed=1)
    ens, _heads, losses = _pretrain(seed=0)
    assert len(losses) == 150 and np.mean(losses[-20:]) < 0.9 * np.mean(losses[:5])
    assert not torch.equal(ens.weights[0], before.weights[0])
    assert not torch.equal(ens.weights[1], before.weights[1])
    assert torch.equal(ens.weights[2], before.weights[2])
    assert torch.equal(ens.biases[2], before.biases[2])
    assert all(p.grad is None for p in ens.parameters())  # the fit's optimiser sees none
    _ens2, _h2, again = _pretrain(seed=0)
    assert again == losses


def test_the_trainer_keeps_its_heads_across_a_checkpoint() -> None:
    """A trainer restored from reed_state continues exactly as the one it was saved from."""
    segs = make_segments(6, rng=np.random.default_rng(1), length=8, obs_dim=3)
    batch = SegmentBatch.from_segments(segs)
    obs, acts, nxt = segment_transitions(batch)
    fit = FitConfig(reed=ReedConfig(on=True, steps=5, batch_size=8, data="segments"))

    def trainer() -> RewardTrainer:
        return RewardTrainer(
            RewardEnsemble(3, 1, RewardConfig(members=2, hidden=(8,)), seed=2), fit
        )

    a = trainer()
    assert a.reed_state() is None
    a.reed_pretrain(obs, acts, nxt, batch, torch.Generator().manual_seed(0))
    saved = {k: v.clone() for k, v in (a.reed_state() or {}).items()}
    weights = {k: v.clone() for k, v in a.ensemble.state_dict().items()}
    b = trainer()
    b.load_reed_state(saved)
    b.ensemble.load_state_dict(weights)
    la = a.reed_pretrain(obs, acts, nxt, batch, torch.Generator().manual_seed(1))
    lb = b.reed_pretrain(obs, acts, nxt, batch, torch.Generator().manual_seed(1))
    assert la == lb


def test_bad_settings_say_what_to_change() -> None:
    with pytest.raises(ConfigError, match="batch_size ≥ 2"):
        ReedConfig(batch_size=1)
    with pytest.raises(ConfigError, match="temperature"):
        ReedConfig(temperature=0.0)
    with pytest.raises(ConfigError, match=r"--fit\.reed\.data segments"):
        TrainConfig(algo="ppo", fit=FitConfig(reed=ReedConfig(on=True)))
    TrainConfig(algo="ppo", fit=FitConfig(reed=ReedConfig(on=True, data="segments")))
    fit = FitConfig(reed=ReedConfig(on=True))
    for cfg in (RewardConfig(hidden=()), RewardConfig(abs_inputs=True)):
        with pytest.raises(ConfigError, match="MLP reward model with hidden layers"):
            RewardTrainer(RewardEnsemble(3, 1, cfg), fit)
    ens = RewardEnsemble(3, 1, RewardConfig(members=1, hidden=(4,)))
    with pytest.raises(DataError, match="at least 2"):
        reed_pretrain(
            ens,
            ReedHeads(ens, 2),
            np.zeros((1, 3)),
            np.zeros((1, 1)),
            np.zeros((1, 3)),
            ReedConfig(on=True),
            torch.Generator(),
        )
    with pytest.raises(ConfigError, match=r"fit\.reed\.on"):
        RewardTrainer(ens).reed_pretrain(
            np.zeros((2, 3)),
            np.zeros((2, 1)),
            np.zeros((2, 3)),
            None,
            torch.Generator(),  # type: ignore[arg-type]
        )

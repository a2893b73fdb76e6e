"""Small units of the core: distributions, spaces, explorations, filters, schedules, batches."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.distributions as D

from corral import ConfigError, MultiAgentBatch, SampleBatch
from corral.core.common.actions import ActionAdapter
from corral.core.common.spaces import ObservationPreprocessor
from corral.core.learning.exploration import (
    EpsilonGreedy,
    GaussianNoise,
    OrnsteinUhlenbeckNoise,
    Random,
    SoftQ,
    StochasticSampling,
    make_exploration,
)
from corral.core.learning.filters import MeanStdFilter
from corral.core.learning.schedules import PiecewiseSchedule, linear_schedule
from corral.core.networks.default_models import Tanh
from corral.core.networks.distributions import Categorical, DiagGaussian, MultiCategorical, distribution_for


# ---------------------------------------------------------------------- #
# distributions
# ---------------------------------------------------------------------- #
@pytest.fixture
def gen():
    return torch.Generator().manual_seed(0)


def test_categorical_matches_torch(gen):
    logits = torch.randn(6, 4, generator=gen)
    other = torch.randn(6, 4, generator=gen)
    actions = torch.randint(0, 4, (6,), generator=gen)
    ours, ref = Categorical(logits), D.Categorical(logits=logits)
    torch.testing.assert_close(ours.logp(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    torch.testing.assert_close(ours.kl(ours), torch.zeros(6), atol=1e-6, rtol=0)
    torch.testing.assert_close(ours.kl(Categorical(other)), D.kl_divergence(ref, D.Categorical(logits=other)))
    assert torch.equal(ours.deterministic_sample(), logits.argmax(-1))


def test_categorical_sample_frequencies():
    torch.manual_seed(0)
    probs = torch.tensor([0.1, 0.2, 0.7])
    dist = Categorical(probs.log().expand(20_000, 3))
    counts = torch.bincount(dist.sample(), minlength=3).float() / 20_000
    torch.testing.assert_close(counts, probs, atol=0.02, rtol=0)


def test_multicategorical_matches_torch(gen):
    nvec = [2, 3, 4]
    logits = torch.randn(5, sum(nvec), generator=gen)
    other = torch.randn(5, sum(nvec), generator=gen)
    actions = torch.stack([torch.randint(0, n, (5,), generator=gen) for n in nvec], dim=-1)
    ours = MultiCategorical(logits, nvec)
    refs = [D.Categorical(logits=x) for x in torch.split(logits, nvec, dim=-1)]
    other_refs = [D.Categorical(logits=x) for x in torch.split(other, nvec, dim=-1)]
    torch.testing.assert_close(ours.logp(actions), sum(r.log_prob(actions[:, i]) for i, r in enumerate(refs)))
    torch.testing.assert_close(ours.entropy(), sum(r.entropy() for r in refs))
    torch.testing.assert_close(ours.kl(ours), torch.zeros(5), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        ours.kl(MultiCategorical(other, nvec)), sum(D.kl_divergence(p, q) for p, q in zip(refs, other_refs, strict=True))
    )
    sample = ours.sample()
    assert sample.shape == (5, 3)
    assert all(int(sample[:, i].max()) < n for i, n in enumerate(nvec))


def test_diag_gaussian_matches_torch(gen):
    inputs = torch.randn(7, 6, generator=gen)
    other_inputs = torch.randn(7, 6, generator=gen)
    mean, log_std = inputs.chunk(2, dim=-1)
    o_mean, o_log_std = other_inputs.chunk(2, dim=-1)
    ref = D.Independent(D.Normal(mean, log_std.exp()), 1)
    other_ref = D.Independent(D.Normal(o_mean, o_log_std.exp()), 1)
    ours = DiagGaussian(inputs)
    actions = torch.randn(7, 3, generator=gen)
    torch.testing.assert_close(ours.logp(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    torch.testing.assert_close(ours.kl(ours), torch.zeros(7), atol=1e-6, rtol=0)
    torch.testing.assert_close(ours.kl(DiagGaussian(other_inputs)), D.kl_divergence(ref, other_ref))
    assert torch.equal(ours.deterministic_sample(), mean)


def test_distribution_for_spaces():
    assert distribution_for(gym.spaces.Discrete(5)) == (Categorical, 5)
    cls, n = distribution_for(gym.spaces.MultiDiscrete([2, 3]))
    assert n == 5 and issubclass(cls, MultiCategorical)
    assert cls(torch.zeros(1, 5)).sample().shape == (1, 2)
    assert distribution_for(gym.spaces.Box(-1, 1, (3,))) == (DiagGaussian, 6)


# ---------------------------------------------------------------------- #
# spaces
# ---------------------------------------------------------------------- #
def test_discrete_is_one_hot_with_start_offset():
    pre = ObservationPreprocessor(gym.spaces.Discrete(3, start=1))
    assert pre.shape == (3,)
    out = pre(np.array([1, 3, 2]))
    np.testing.assert_array_equal(out, [[1, 0, 0], [0, 0, 1], [0, 1, 0]])
    assert out.dtype == np.float32


def test_multidiscrete_is_concatenated_one_hots():
    pre = ObservationPreprocessor(gym.spaces.MultiDiscrete([2, 3]))
    assert pre.shape == (5,)
    np.testing.assert_array_equal(pre(np.array([[1, 0], [0, 2]])), [[0, 1, 1, 0, 0], [1, 0, 0, 0, 1]])


def test_dict_and_tuple_are_flattened_in_space_order():
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Box(-5, 5, (2, 2))})
    pre = ObservationPreprocessor(space)
    assert pre.shape == (6,)
    obs = {"a": np.array([1, 0]), "b": np.arange(8, dtype=np.float32).reshape(2, 2, 2)}
    np.testing.assert_array_equal(pre(obs), [[0, 1, 0, 1, 2, 3], [1, 0, 4, 5, 6, 7]])

    tup = gym.spaces.Tuple((gym.spaces.Box(0, 1, (1,)), gym.spaces.Discrete(3), gym.spaces.MultiBinary(2)))
    pre = ObservationPreprocessor(tup)
    assert pre.shape == (6,)
    obs = (np.array([[0.5], [0.25]], np.float32), np.array([2, 0]), np.array([[1, 0], [0, 1]], np.int8))
    np.testing.assert_array_equal(pre(obs), [[0.5, 0, 0, 1, 1, 0], [0.25, 1, 0, 0, 0, 1]])


def test_preprocessor_matches_space_samples_shape():
    space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1, 1, (3,)), "mode": gym.spaces.Discrete(4), "bits": gym.spaces.MultiDiscrete([2, 2])}
    )
    pre = ObservationPreprocessor(space)
    vec = gym.vector.utils.batch_space(space, 5)
    vec.seed(0)
    obs = vec.sample()
    out = pre(obs)
    assert out.shape == (5, *pre.shape) == (5, 3 + 4 + 4)
    # gymnasium sorts Dict keys: bits (2 + 2 one-hot), mode (4 one-hot), pos (3 floats)
    assert list(space.spaces) == ["bits", "mode", "pos"]
    assert np.all(out[:, 0:2].sum(axis=1) == 1) and np.all(out[:, 2:4].sum(axis=1) == 1)
    assert np.all(out[:, 4:8].sum(axis=1) == 1)
    np.testing.assert_array_equal(out[:, 4:8].argmax(axis=1), obs["mode"])
    np.testing.assert_array_equal(out[:, 8:], obs["pos"])


def test_image_keeps_shape_and_dtype():
    space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    pre = ObservationPreprocessor(space)
    assert pre.shape == (8, 8, 3) and pre.dtype == np.uint8
    obs = np.full((2, 8, 8, 3), 7, np.uint8)
    assert pre(obs).dtype == np.uint8 and pre(obs).shape == (2, 8, 8, 3)


def test_action_adapter_scales_and_clips_normalized_actions():
    space = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32))
    adapter = ActionAdapter(space, normalize_actions=True, clip_actions=False)
    assert adapter.policy_space == gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    out = adapter(np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0], [5.0, -3.0]], np.float32))
    np.testing.assert_allclose(out, [[-2, 0], [2, 10], [0, 5], [2, 0]])


def test_action_adapter_clips_without_normalizing():
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    clipping = ActionAdapter(space, normalize_actions=False, clip_actions=True)
    assert clipping.policy_space == space
    np.testing.assert_array_equal(clipping(np.array([[3.0], [-0.5], [-9.0]])), [[2.0], [-0.5], [-2.0]])
    raw = ActionAdapter(space, normalize_actions=False, clip_actions=False)
    np.testing.assert_array_equal(raw(np.array([[3.0]])), [[3.0]])


def test_action_adapter_leaves_unbounded_box_unscaled():
    space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    adapter = ActionAdapter(space, normalize_actions=True, clip_actions=False)
    assert adapter.policy_space == space
    np.testing.assert_array_equal(adapter(np.array([[5.0, -7.0]])), [[5.0, -7.0]])


def test_action_adapter_discrete_start():
    adapter = ActionAdapter(gym.spaces.Discrete(3, start=-1), True, False)
    np.testing.assert_array_equal(adapter(np.array([0, 1, 2])), [-1, 0, 1])


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Discrete(3, start=2),
        gym.spaces.MultiDiscrete([3, 4]),
        gym.spaces.Box(-2.0, 4.0, (2, 3), np.float32),
        gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
        gym.spaces.Dict(
            {
                "a": gym.spaces.Discrete(3),
                "b": gym.spaces.Tuple([gym.spaces.Box(-1.0, 3.0, (2,)), gym.spaces.MultiDiscrete([2, 2])]),
            }
        ),
    ],
    ids=["discrete-with-start", "multi-discrete", "normalized-box", "unbounded-box", "dict-of-tuple"],
)
def test_action_adapter_maps_env_actions_back_to_the_policy_s_and_they_act_the_same(space):
    adapter = ActionAdapter(space, normalize_actions=True, clip_actions=False)
    space.seed(0)
    taken = [space.sample() for _ in range(6)]
    policy_actions = adapter.policy_actions(taken)
    assert policy_actions.shape == (6, *adapter.policy_space.shape)
    again = adapter.rows(adapter(policy_actions))
    for first, second in zip(taken, again, strict=True):
        np.testing.assert_allclose(gym.spaces.flatten(space, first), gym.spaces.flatten(space, second), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- #
# explorations
# ---------------------------------------------------------------------- #
DISCRETE = gym.spaces.Discrete(4)
MULTI = gym.spaces.MultiDiscrete([2, 5])
BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _dist_for(space, batch=64):
    cls, n = distribution_for(space)
    if isinstance(space, gym.spaces.Box):
        # the policy acts in [-1, 1]: means inside it, a small spread
        mean = torch.rand(batch, n // 2) - 0.5
        return cls(torch.cat([mean, torch.full_like(mean, -4.0)], dim=-1))
    return cls(torch.randn(batch, n))


@pytest.mark.parametrize(
    ("config", "space", "cls"),
    [
        ({"type": "StochasticSampling"}, DISCRETE, StochasticSampling),
        ({"type": "StochasticSampling", "random_timesteps": 100}, MULTI, StochasticSampling),
        ({"type": "StochasticSampling"}, BOX, StochasticSampling),
        ({"type": "EpsilonGreedy", "initial_epsilon": 1.0}, DISCRETE, EpsilonGreedy),
        ({"type": "SoftQ", "temperature": 0.5}, DISCRETE, SoftQ),
        ({"type": "GaussianNoise", "random_timesteps": 0, "stddev": 5.0}, BOX, GaussianNoise),
        ({"type": "GaussianNoise", "random_timesteps": 100}, BOX, GaussianNoise),
        ({"type": "OrnsteinUhlenbeckNoise", "random_timesteps": 0, "ou_sigma": 3.0}, BOX, OrnsteinUhlenbeckNoise),
        ({"type": "Random"}, DISCRETE, Random),
        ({"type": "Random"}, MULTI, Random),
        ({"type": "Random"}, BOX, Random),
        ({"type": "epsilongreedy"}, DISCRETE, EpsilonGreedy),  # registry lookup ignores case
    ],
)
@pytest.mark.parametrize("explore", [True, False])
def test_explorations_from_registry_act_inside_the_space(config, space, cls, explore):
    torch.manual_seed(0)
    exploration = make_exploration(config, space)
    assert type(exploration) is cls
    for timestep in (0, 50, 10_000):
        actions = exploration.get_exploration_action(_dist_for(space), timestep, explore).numpy()
        assert actions.shape[0] == 64
        assert all(space.contains(a.astype(space.dtype)) for a in actions)


def test_make_exploration_does_not_mutate_its_config():
    config = {"type": "EpsilonGreedy", "final_epsilon": 0.1}
    make_exploration(config, DISCRETE)
    assert config == {"type": "EpsilonGreedy", "final_epsilon": 0.1}


def test_make_exploration_unknown_type_and_option():
    with pytest.raises(ConfigError, match="Did you mean 'SoftQ'"):
        make_exploration({"type": "SoftQQ"}, DISCRETE)
    with pytest.raises(ConfigError, match="Did you mean 'temperature'"):
        make_exploration({"type": "SoftQ", "temprature": 2.0}, DISCRETE)


def test_epsilon_greedy_on_box_space_is_config_error():
    with pytest.raises(ConfigError) as info:
        make_exploration({"type": "EpsilonGreedy"}, BOX)
    assert "EpsilonGreedy" in str(info.value)
    assert "Discrete" in str(info.value)


def test_continuous_noise_on_discrete_space_is_config_error():
    with pytest.raises(ConfigError, match="Box"):
        make_exploration({"type": "GaussianNoise"}, DISCRETE)


def test_epsilon_greedy_bad_epsilon():
    with pytest.raises(ConfigError, match="final_epsilon"):
        make_exploration({"type": "EpsilonGreedy", "final_epsilon": 1.5}, DISCRETE)


def test_epsilon_schedule_values():
    eg = make_exploration(
        {
            "type": "EpsilonGreedy",
            "initial_epsilon": 1.0,
            "final_epsilon": 0.1,
            "epsilon_timesteps": 1000,
            "warmup_timesteps": 100,
        },
        DISCRETE,
    )
    expected = {0: 1.0, 99: 1.0, 100: 1.0, 600: 0.55, 1100: 0.1, 50_000: 0.1}
    for t, eps in expected.items():
        assert eg.current_epsilon(t) == pytest.approx(eps), t
        assert eg.get_info(t)["cur_epsilon"] == pytest.approx(eps)


def test_epsilon_greedy_is_greedy_without_explore():
    torch.manual_seed(0)
    eg = make_exploration({"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 1.0}, DISCRETE)
    dist = _dist_for(DISCRETE, 500)
    assert torch.equal(eg.get_exploration_action(dist, 0, explore=False), dist.inputs.argmax(-1))


def test_epsilon_greedy_random_fraction():
    torch.manual_seed(0)
    eg = make_exploration(
        {"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.0, "epsilon_timesteps": 1000}, DISCRETE
    )
    n = 20_000
    logits = torch.zeros(n, 4)
    logits[:, 2] = 10.0  # greedy action is 2
    dist = Categorical(logits)
    for t, eps in ((0, 1.0), (400, 0.6), (1000, 0.0)):
        actions = eg.get_exploration_action(dist, t, explore=True)
        non_greedy = float((actions != 2).float().mean())
        # a uniformly random action is the greedy one a quarter of the time
        assert non_greedy == pytest.approx(eps * 3 / 4, abs=0.02), t
        if eps == 1.0:
            counts = torch.bincount(actions, minlength=4).float() / n
            torch.testing.assert_close(counts, torch.full((4,), 0.25), atol=0.02, rtol=0)


def test_softq_low_temperature_is_greedy_and_high_is_uniform():
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, 0.0, 0.0]]).expand(10_000, 4)
    dist = Categorical(logits)
    cold = make_exploration({"type": "SoftQ", "temperature": 0.01}, DISCRETE)
    assert torch.all(cold.get_exploration_action(dist, 0, True) == 1)
    hot = make_exploration({"type": "SoftQ", "temperature": 1000.0}, DISCRETE)
    counts = torch.bincount(hot.get_exploration_action(dist, 0, True), minlength=4).float() / 10_000
    torch.testing.assert_close(counts, torch.full((4,), 0.25), atol=0.02, rtol=0)
    with pytest.raises(ConfigError, match="temperature"):
        make_exploration({"type": "SoftQ", "temperature": 0}, DISCRETE)


def test_stochastic_sampling_deterministic_without_explore():
    ss = make_exploration({"type": "StochasticSampling"}, BOX)
    dist = _dist_for(BOX, 8)
    assert torch.equal(ss.get_exploration_action(dist, 0, False), dist.deterministic_sample())


def test_gaussian_noise_scale_and_random_phase():
    gn = make_exploration(
        {
            "type": "GaussianNoise",
            "random_timesteps": 10,
            "initial_scale": 1.0,
            "final_scale": 0.0,
            "scale_timesteps": 100,
            "stddev": 0.1,
        },
        BOX,
    )
    assert gn.get_info(10)["cur_noise_scale"] == pytest.approx(1.0)
    assert gn.get_info(60)["cur_noise_scale"] == pytest.approx(0.5)
    dist = DiagGaussian(torch.zeros(5, 4))
    # after annealing to zero, the action is the mean exactly
    assert torch.equal(gn.get_exploration_action(dist, 1000, True), torch.zeros(5, 2))
    torch.manual_seed(0)
    noisy = gn.get_exploration_action(dist, 60, True)
    assert not torch.equal(noisy, torch.zeros(5, 2))
    assert float(noisy.abs().max()) < 0.5


def test_ornstein_uhlenbeck_state_is_saved_and_restored():
    ou = make_exploration({"type": "OrnsteinUhlenbeckNoise", "random_timesteps": 0}, BOX)
    dist = DiagGaussian(torch.zeros(3, 4))
    torch.manual_seed(0)
    for _ in range(5):
        ou.get_exploration_action(dist, 0, True)
    state = ou.get_state()
    assert state["ou_state"].shape == (3, 2) and torch.any(state["ou_state"] != 0)
    torch.manual_seed(1)
    continued = [ou.get_exploration_action(dist, 0, True) for _ in range(3)]

    fresh = make_exploration({"type": "OrnsteinUhlenbeckNoise", "random_timesteps": 0}, BOX)
    fresh.set_state(state)
    torch.manual_seed(1)
    replayed = [fresh.get_exploration_action(dist, 0, True) for _ in range(3)]
    for a, b in zip(continued, replayed, strict=True):
        torch.testing.assert_close(a, b)
    # the saved state is a copy: acting did not change it
    assert not torch.equal(state["ou_state"], ou.get_state()["ou_state"])


def test_ornstein_uhlenbeck_noise_is_in_units_of_the_space_s_width_as_rllib_s() -> None:
    wide = gym.spaces.Box(np.array([-1.0, -5.0, -np.inf]), np.array([1.0, 5.0, np.inf]), dtype=np.float32)
    ou = make_exploration({"type": "OrnsteinUhlenbeckNoise", "random_timesteps": 0, "ou_theta": 0.0}, wide)
    dist = DiagGaussian(torch.zeros(1, 6))
    torch.manual_seed(0)
    action = ou.get_exploration_action(dist, 0, True)
    state = ou.get_state()["ou_state"]
    # scale 1 at timestep 0, ou_base_scale 0.1; widths 2 and 10, and 1 where the space is unbounded (nothing clips:
    # one step of sigma 0.2 noise is far inside the bounds)
    torch.testing.assert_close(action, 0.1 * state * torch.tensor([2.0, 10.0, 1.0]))


def test_ornstein_uhlenbeck_noise_is_correlated():
    torch.manual_seed(0)
    ou = make_exploration({"type": "OrnsteinUhlenbeckNoise", "random_timesteps": 0, "final_scale": 1.0}, BOX)
    dist = DiagGaussian(torch.zeros(2000, 2))
    a = ou.get_exploration_action(dist, 0, True)
    b = ou.get_exploration_action(dist, 0, True)
    corr = np.corrcoef(a[:, 0].numpy(), b[:, 0].numpy())[0, 1]
    assert corr > 0.5


def test_random_ignores_policy_and_covers_the_space():
    torch.manual_seed(0)
    rnd = make_exploration({"type": "Random"}, DISCRETE)
    logits = torch.zeros(4000, 4)
    logits[:, 0] = 50.0
    counts = torch.bincount(rnd.get_exploration_action(Categorical(logits), 10**6, True), minlength=4).float() / 4000
    torch.testing.assert_close(counts, torch.full((4,), 0.25), atol=0.03, rtol=0)


# ---------------------------------------------------------------------- #
# filters
# ---------------------------------------------------------------------- #
def test_mean_std_filter_matches_numpy():
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc=3.0, scale=2.0, size=(n, 3)) * [1, 10, 0.1] for n in (5, 1, 17, 40)]
    filt = MeanStdFilter((3,))
    for batch in batches:
        filt.update(batch)
    everything = np.concatenate(batches)
    np.testing.assert_allclose(filt.mean, everything.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(filt.var, everything.var(axis=0), rtol=1e-10)
    assert filt.count == len(everything)
    out = filt(everything, update=False)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.std(axis=0), 1.0, atol=1e-4)
    assert out.dtype == np.float32


def test_mean_std_filter_call_updates_and_clips():
    filt = MeanStdFilter((1,), clip=2.0)
    filt(np.array([[0.0], [2.0]]))
    assert filt.count == 2 and filt.mean[0] == pytest.approx(1.0)
    assert filt(np.array([[100.0]]), update=False)[0, 0] == pytest.approx(2.0)
    assert filt.count == 2
    filt.update(np.zeros((0, 1)))
    assert filt.count == 2


def test_mean_std_filter_state_round_trip():
    rng = np.random.default_rng(1)
    filt = MeanStdFilter((2,))
    filt.update(rng.normal(size=(30, 2)))
    state = filt.get_state()
    assert all(isinstance(state[k], torch.Tensor) for k in ("mean", "var"))
    other = MeanStdFilter((2,))
    other.set_state(state)
    probe = rng.normal(size=(4, 2))
    np.testing.assert_array_equal(other(probe, update=False), filt(probe, update=False))
    filt.update(rng.normal(size=(10, 2)))  # the restored copy is independent
    assert other.count == 30


# ---------------------------------------------------------------------- #
# schedules
# ---------------------------------------------------------------------- #
@pytest.mark.parametrize("shape", [(3, 5), (512, 64), (2, 4096)])
def test_tanh_matches_torch_in_value_and_gradient(shape):
    """The sigmoid route for large inputs is tanh: values and gradients agree with torch.tanh to float32 rounding."""
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 4).requires_grad_()
    ours = Tanh()(x)
    ours.sum().backward()
    assert x.grad is not None
    ours_grad, x.grad = x.grad.clone(), None
    reference = torch.tanh(x)
    reference.sum().backward()
    torch.testing.assert_close(ours, reference, atol=3e-7, rtol=0)
    torch.testing.assert_close(ours_grad, x.grad, atol=1e-6, rtol=0)
    extremes = Tanh()(torch.tensor([-1e30, -50.0, 0.0, 50.0, 1e30]).repeat(1000))
    assert extremes.abs().max() <= 1.0 and extremes[2] == 0.0


def test_piecewise_schedule():
    schedule = PiecewiseSchedule([(0, 1.0), (100, 0.0), (200, 0.5)])
    expected = {-10: 1.0, 0: 1.0, 25: 0.75, 100: 0.0, 150: 0.25, 200: 0.5, 10_000: 0.5}
    for t, value in expected.items():
        assert schedule(t) == pytest.approx(value), t


def test_linear_schedule_with_start():
    schedule = linear_schedule(1.0, 0.0, 10, start=5)
    assert [schedule(t) for t in (0, 5, 10, 15, 20)] == pytest.approx([1.0, 1.0, 0.5, 0.0, 0.0])


# ---------------------------------------------------------------------- #
# sample batches
# ---------------------------------------------------------------------- #
def _batch(n, offset=0):
    return SampleBatch(
        {
            SampleBatch.OBS: np.arange(offset, offset + n, dtype=np.float32)[:, None].repeat(2, axis=1),
            SampleBatch.REWARDS: np.arange(offset, offset + n, dtype=np.float32),
        }
    )


def test_sample_batch_count_and_select():
    batch = _batch(10)
    assert batch.count == len(batch) == 10
    assert SampleBatch().count == 0
    picked = batch.select(np.array([1, 3, 5]))
    assert isinstance(picked, SampleBatch)
    np.testing.assert_array_equal(picked[SampleBatch.REWARDS], [1, 3, 5])
    np.testing.assert_array_equal(picked[SampleBatch.OBS][:, 0], [1, 3, 5])
    assert batch.select(slice(2, 4)).count == 2
    assert batch.select(batch[SampleBatch.REWARDS] > 6).count == 3


@pytest.mark.parametrize("rng", [None, np.random.default_rng(0)])
def test_minibatches_cover_every_row_once(rng):
    batch = _batch(23)
    minibatches = list(batch.minibatches(5, rng=rng))
    assert [mb.count for mb in minibatches] == [5, 5, 5, 5, 3]
    rows = np.concatenate([mb[SampleBatch.REWARDS] for mb in minibatches])
    assert sorted(rows.tolist()) == list(range(23))
    for mb in minibatches:  # columns stay aligned
        np.testing.assert_array_equal(mb[SampleBatch.OBS][:, 1], mb[SampleBatch.REWARDS])
    if rng is not None:
        assert rows.tolist() != list(range(23))


def test_shuffle_is_a_permutation():
    shuffled = _batch(12).shuffle(np.random.default_rng(3))
    assert sorted(shuffled[SampleBatch.REWARDS].tolist()) == list(range(12))
    np.testing.assert_array_equal(shuffled[SampleBatch.OBS][:, 0], shuffled[SampleBatch.REWARDS])


def test_sample_batch_concat():
    joined = SampleBatch.concat([_batch(3), _batch(4, offset=3)])
    assert joined.count == 7
    np.testing.assert_array_equal(joined[SampleBatch.REWARDS], np.arange(7))


def test_multi_agent_batch_concat_per_policy():
    first = MultiAgentBatch({"p0": _batch(3), "p1": _batch(2, offset=100)}, env_steps=3)
    second = MultiAgentBatch({"p0": _batch(4, offset=3)}, env_steps=4)
    third = MultiAgentBatch({"p1": _batch(1, offset=102), "p2": _batch(2)}, env_steps=2)
    joined = MultiAgentBatch.concat([first, second, third])
    assert joined.env_steps == 9
    assert joined.agent_steps == 3 + 2 + 4 + 1 + 2
    assert set(joined.policy_batches) == {"p0", "p1", "p2"}
    np.testing.assert_array_equal(joined.policy_batches["p0"][SampleBatch.REWARDS], np.arange(7))
    np.testing.assert_array_equal(joined.policy_batches["p1"][SampleBatch.REWARDS], [100, 101, 102])
    assert joined.policy_batches["p2"].count == 2
    assert "p0: 7" in repr(joined)


def test_no_export_of_corral_core_is_shadowed_by_a_submodule_of_the_same_name() -> None:
    """Importing ``corral.core.X`` sets the package attribute X to the module, hiding an export named X."""
    import importlib
    import pkgutil
    import types

    import corral.core

    for module in pkgutil.iter_modules(corral.core.__path__):
        importlib.import_module(f"corral.core.{module.name}")
    shadowed = [name for name in corral.core.__all__ if isinstance(getattr(corral.core, name), types.ModuleType)]
    assert shadowed == []


def test_mean_std_filter_deltas_merged_elsewhere_equal_one_filter_that_saw_everything():
    rng = np.random.default_rng(2)
    first, second, third = (rng.normal(loc=i, scale=i + 1, size=(n, 2)) for i, n in enumerate((7, 20, 5)))
    runner_a, runner_b, learner = MeanStdFilter((2,)), MeanStdFilter((2,)), MeanStdFilter((2,))
    runner_a.keeps_delta = runner_b.keeps_delta = True
    runner_a.update(first)
    runner_b.update(second)
    runner_a.update(third)
    learner.merge(runner_a.take_delta())
    learner.merge(runner_b.take_delta())
    everything = np.concatenate([first, second, third])
    np.testing.assert_allclose(learner.mean, everything.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(learner.var, everything.var(axis=0), rtol=1e-10)
    assert learner.count == 32
    assert runner_a.take_delta()["count"] == 0  # taken once
    runner_b.update(first)
    runner_b.set_state(learner.get_state())  # the broadcast totals replace the copy's, its unreported delta stays
    assert runner_b.count == 32 and runner_b.take_delta()["count"] == 7
    learner.merge(MeanStdFilter((2,)).take_delta())  # an empty delta changes nothing
    assert learner.count == 32
    learner.update(first)
    assert learner.take_delta()["count"] == 0  # a filter that does not report keeps no delta

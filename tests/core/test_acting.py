"""compute_single_action / compute_actions with RLlib's signatures: state second, the rest by keyword, RLlib's returns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import corral
from corral import ConfigError

OBS = np.array([0.01, -0.02, 0.03, 0.04], np.float32)


@pytest.fixture
def algo(make_algo) -> Any:
    return make_algo()


def test_the_second_positional_argument_is_rnn_state_not_explore(algo) -> None:
    """RLlib's compute_single_action(obs, state): a state list must never switch exploration on."""
    greedy = algo.compute_single_action(OBS, explore=False)
    assert algo.compute_single_action(OBS, [], explore=False) == greedy  # an empty state: RLlib's stateless call
    assert algo.compute_single_action(OBS, None, explore=False) == greedy
    with pytest.raises(ConfigError, match=r"state=\[array.*stateless model.*model.use_lstm.*explore=False"):
        algo.compute_single_action(OBS, [np.zeros(2, np.float32)])
    with pytest.raises(ConfigError, match=r"state=False is RNN state.*by keyword"):  # a call written for explore second
        algo.compute_single_action(OBS, False)


def test_full_fetch_returns_the_action_no_state_and_the_policy_s_extras(algo) -> None:
    action, state, extras = algo.compute_single_action(OBS, explore=False, full_fetch=True)
    assert action == algo.compute_single_action(OBS, explore=False) and state == []
    assert set(extras) == {"action_dist_inputs", "action_logp", "action_prob", "vf_preds"}
    logits = extras["action_dist_inputs"]
    assert logits.shape == (2,) and action == int(np.argmax(logits))  # one row, without the batch axis
    log_softmax = logits - np.log(np.exp(logits).sum())
    assert extras["action_logp"] == pytest.approx(log_softmax[action], abs=1e-5)
    assert extras["action_prob"] == pytest.approx(np.exp(extras["action_logp"]))
    assert np.ndim(extras["vf_preds"]) == 0
    assert extras["vf_preds"] == pytest.approx(algo.get_policy().compute_values(OBS[None])[0])


def test_input_dict_carries_the_observation(algo) -> None:
    assert algo.compute_single_action(input_dict={"obs": OBS}, explore=False) == algo.compute_single_action(OBS, explore=False)
    with pytest.raises(ConfigError, match="either input_dict or the observation"):
        algo.compute_single_action(OBS, input_dict={"obs": OBS})
    with pytest.raises(ConfigError, match="stateless model"):
        algo.compute_single_action(input_dict={"obs": OBS, "state_in_0": np.zeros(4)})
    with pytest.raises(ConfigError, match=r"needs the observation under 'obs'; it has \['observation'\]"):
        algo.compute_single_action(input_dict={"observation": OBS})
    with pytest.raises(ConfigError, match="needs an observation"):
        algo.compute_single_action()


def test_rllib_s_other_keywords_are_accepted(algo) -> None:
    greedy = algo.compute_single_action(OBS, explore=False)
    given = algo.compute_single_action(
        OBS, [], prev_action=1, prev_reward=1.0, info={}, episode=None, timestep=10, explore=False,
        unsquash_action=True, clip_action=False, policy_id="default_policy", full_fetch=False,
    )  # fmt: skip
    assert given == greedy


def test_unsquash_action_and_clip_action_override_the_config(make_algo) -> None:
    """Pendulum's Box is [-2, 2]; normalize_actions (the default) unsquashes the policy's [-1, 1] onto it."""
    algo = make_algo(env="Pendulum-v1")
    policy = algo.get_policy()
    weights = policy.get_weights()
    weights["pi_head.weight"] = np.zeros_like(weights["pi_head.weight"])
    obs = np.array([1.0, 0.0, 0.0], np.float32)
    for mean, unsquashed, clipped in [(0.25, 0.5, 0.25), (5.0, 2.0, 2.0), (-1.5, -2.0, -1.5)]:
        weights["pi_head.bias"] = np.array([mean], np.float32)  # the deterministic action, whatever the observation
        policy.set_weights(weights)
        assert algo.compute_single_action(obs, explore=False, unsquash_action=False) == pytest.approx([mean])
        assert algo.compute_single_action(obs, explore=False) == pytest.approx([unsquashed])
        assert algo.compute_single_action(obs, explore=False, unsquash_action=False, clip_action=True) == pytest.approx([clipped])
        batch = algo.compute_actions(np.stack([obs, obs]), explore=False, unsquash_actions=False)
        assert batch == pytest.approx(np.full((2, 1), mean))


def test_timestep_is_what_the_exploration_schedule_reads(make_algo) -> None:
    config = (
        corral.get_config("DQN")
        .environment("CartPole-v1")
        .exploration(exploration_config={"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.0,
                                         "epsilon_timesteps": 1000})
        .debugging(seed=0)
    )  # fmt: skip
    algo = make_algo(config)
    greedy = algo.compute_single_action(OBS, explore=False)
    at_the_end = {algo.compute_single_action(OBS, explore=True, timestep=1000) for _ in range(30)}
    at_the_start = {algo.compute_single_action(OBS, explore=True, timestep=0) for _ in range(60)}
    assert at_the_end == {greedy}
    assert at_the_start == {0, 1}


def test_compute_actions_takes_rllib_s_state_and_full_fetch(algo) -> None:
    observations = {"a": OBS, "b": -OBS}
    actions = algo.compute_actions(observations, explore=False)
    assert actions == {agent: algo.compute_single_action(obs, explore=False) for agent, obs in observations.items()}
    fetched, states, extras = algo.compute_actions(observations, explore=False, full_fetch=True)
    assert fetched == actions and states == {"a": [], "b": []}
    assert extras["action_dist_inputs"].shape == (2, 2)  # batched, a row per agent in the order given
    assert int(np.argmax(extras["action_dist_inputs"][1])) == actions["b"]
    with_state = algo.compute_actions(observations, {"a": [], "b": []}, explore=False)
    assert isinstance(with_state, tuple) and with_state[0] == actions  # a state given: RLlib returns the tuple
    with pytest.raises(ConfigError, match=r"compute_actions: state=.*stateless model"):
        algo.compute_actions(observations, {"a": [np.zeros(2)]})
    with pytest.raises(ConfigError, match="state=False is RNN state"):
        algo.compute_actions(observations, False)
    batch, batch_states, batch_extras = algo.compute_actions(np.stack([OBS, -OBS]), explore=False, full_fetch=True)
    assert batch.tolist() == [actions["a"], actions["b"]] and batch_states == []
    assert batch_extras["vf_preds"].shape == (2,)


def test_policy_compute_single_action_has_rllib_s_signature_and_returns(algo) -> None:
    policy = algo.get_policy()
    action, state, extras = policy.compute_single_action(OBS, explore=False)
    assert action == algo.compute_single_action(OBS, explore=False) and state == []
    assert extras["action_prob"] == pytest.approx(np.exp(extras["action_logp"]))
    assert policy.compute_single_action(input_dict={"obs": OBS}, explore=False)[0] == action
    with pytest.raises(ConfigError, match=r"Policy\.compute_single_action: state=.*the policy has a stateless model"):
        policy.compute_single_action(OBS, [np.zeros(2)])


def test_the_same_observations_give_the_same_extras_whatever_their_memory_layout(algo) -> None:
    """A sampler's column (Fortran order) and a restored checkpoint's copy (C order) act alike, to the last bit."""
    policy = algo.get_policy()
    obs = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    transposed = np.asfortranarray(obs)  # a torch matmul on this layout takes another kernel, whose sums round differently
    (_, from_c), (_, from_fortran) = policy.compute_actions(obs, explore=False), policy.compute_actions(transposed, explore=False)
    for key in ("action_dist_inputs", "vf_preds"):
        np.testing.assert_array_equal(from_c[key], from_fortran[key])
    np.testing.assert_array_equal(policy.compute_values(obs), policy.compute_values(transposed))


def test_corral_s_own_model_takes_rllib_s_batch_dict_as_an_rl_module_does(make_algo) -> None:
    module = make_algo().get_module()
    obs = torch.zeros(3, 4)
    for forward in (module.forward_inference, module.forward_exploration, module.forward_train):
        out = forward({"obs": obs})  # RLlib's docs: rl_module.forward_inference({Columns.OBS: ...})
        expected = forward(obs)["action_dist_inputs"]
        assert out["action_dist_inputs"].shape == (3, 2) and torch.equal(out["action_dist_inputs"], expected)

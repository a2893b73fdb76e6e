"""Recurrent policies (``model.use_lstm``): sequences, the state carried while sampling and acting, and learning with memory."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral import Algorithm, ConfigError, make_multi_agent
from corral.core import SampleBatch
from corral.core.learning.recurrent.sequences import chop_into_sequences, inputs_after
from corral.plugins.a2c import A2CConfig
from corral.plugins.dqn import DQNConfig
from corral.plugins.impala import IMPALAConfig
from corral.plugins.ppo import PPOConfig
from corral.testing.envs import StatelessCartPole
from tests.conftest import SMALL_PPO, best_return_within
from tests.toy_envs import MaskedChoiceEnv

LSTM = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 5, "fcnet_hiddens": [16]}


def lstm_ppo(**model: object) -> PPOConfig:
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=3)
        .training(**SMALL_PPO, model={**LSTM, **model})
        .debugging(seed=0)
    )


def fragment_of(valid: np.ndarray) -> SampleBatch:
    """A [T, N] fragment whose obs are 10 * t + n, with a one-part state of 100 * t + 10 * n."""
    steps, envs = valid.shape
    index = 10 * np.arange(steps)[:, None] + np.arange(envs)[None, :]
    return SampleBatch(
        {
            SampleBatch.OBS: index[..., None].astype(np.float32),
            SampleBatch.ACTIONS: index.astype(np.int64),
            SampleBatch.REWARDS: np.ones((steps, envs), np.float32),
            SampleBatch.VALID: valid,
            "state_in_0": (10 * index)[..., None].astype(np.float32),
            "state_out_0": (10 * index + 1)[..., None].astype(np.float32),
        }
    )


def test_a_fragment_is_cut_into_sequences_per_episode_and_max_seq_len_each_starting_from_its_state() -> None:
    # column 0: an episode of 4 steps, a reset row, then 2 steps; column 1: 7 steps of one episode
    valid = np.array([[1, 1], [1, 1], [1, 1], [1, 1], [0, 1], [1, 1], [1, 1]], dtype=bool)
    sequences = chop_into_sequences(fragment_of(valid), max_seq_len=3)
    assert sequences[SampleBatch.SEQ_LENS].tolist() == [3, 1, 2, 3, 3, 1]
    first_steps = [0, 3, 5, 0, 3, 6]
    assert sequences["state_in_0"][:, 0].tolist() == [
        100 * t + 10 * n for t, n in zip(first_steps, [0, 0, 0, 1, 1, 1], strict=True)
    ]
    assert sequences[SampleBatch.OBS].shape == (6, 3, 1)
    assert sequences[SampleBatch.OBS][2, :, 0].tolist() == [50, 60, 0]  # after the reset row; zero padding
    assert sequences[SampleBatch.OBS][1, :, 0].tolist() == [30, 0, 0]
    assert "state_out_0" not in sequences and SampleBatch.VALID not in sequences
    assert chop_into_sequences(fragment_of(np.zeros((2, 2), bool)), 3)[SampleBatch.OBS].shape == (0, 3, 1)


def test_the_state_after_a_fragment_is_its_last_state_out_or_the_initial_state_after_a_reset_row() -> None:
    valid = np.array([[1, 1], [1, 0]], dtype=bool)
    after = inputs_after(fragment_of(valid), [np.full(1, -1.0, np.float32)])
    assert after["state"][0][:, 0].tolist() == [101, -1]
    assert after["prev_actions"].tolist() == [10, 0] and after["prev_rewards"].tolist() == [1, 0]


def test_the_lstm_trained_on_padded_sequences_gives_what_it_gave_acting_step_by_step() -> None:
    algo = lstm_ppo(lstm_use_prev_action=True, lstm_use_prev_reward=True).build()
    policy = algo.get_policy()
    model = policy.model
    obs = torch.randn(1, 5, 4)
    state = [torch.randn(1, 16), torch.randn(1, 16)]
    prev_actions, prev_rewards = torch.tensor([[0, 1, 1, 0, 1]]), torch.rand(1, 5)
    with torch.no_grad():
        trained = model.forward_train(obs, state, torch.tensor([3]), prev_actions, prev_rewards)
        carried, acted = state, []
        for t in range(3):
            out = model.forward_inference(obs[:, t], carried, None, prev_actions[:, t], prev_rewards[:, t])
            carried = [out["state_out_0"], out["state_out_1"]]
            acted.append(out[SampleBatch.ACTION_DIST_INPUTS])
    torch.testing.assert_close(trained[SampleBatch.ACTION_DIST_INPUTS][:3], torch.cat(acted))
    algo.stop()


def test_the_env_runner_carries_each_sub_environment_s_state_and_starts_it_over_with_each_episode() -> None:
    algo = lstm_ppo().build()
    runner = algo.env_runner_group.local_env_runner
    runner.sample()
    buffers = runner._buffers
    valid, state_in, state_out = buffers[SampleBatch.VALID], buffers["state_in_0"], buffers["state_out_0"]
    after_reset = ~valid[:-1]
    assert after_reset.any()  # CartPole's random early episodes end within the fragment
    np.testing.assert_array_equal(state_in[1:][after_reset], 0.0)
    np.testing.assert_array_equal(state_in[1:][~after_reset], state_out[:-1][~after_reset])
    assert not np.allclose(state_out, 0.0)
    algo.stop()


def test_a_recurrent_ppo_and_a2c_train_on_sequences_and_report_their_steps() -> None:
    for config in (lstm_ppo(), A2CConfig().environment("CartPole-v1").training(train_batch_size=200, model=LSTM)):
        algo = config.debugging(seed=0).build()
        result = algo.train()
        assert result["num_env_steps_trained"] == result["num_env_steps_sampled"] >= 200  # steps, not sequences
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
        algo.stop()


def test_compute_single_action_carries_the_state_as_rllib_returns_it() -> None:
    algo = lstm_ppo().build()
    policy = algo.get_policy()
    initial = policy.get_initial_state()
    assert [part.shape for part in initial] == [(16,), (16,)] and not np.any(initial[0])
    obs = np.array([0.01, 0.02, 0.03, 0.04], np.float32)
    action, state, extras = algo.compute_single_action(obs, initial, explore=False)
    assert action in (0, 1) and len(state) == 2 and state[0].shape == (16,) and np.any(state[0])
    assert "state_out_0" not in extras and SampleBatch.VF_PREDS in extras
    # no state: an episode's start, and the action alone (RLlib's return without state or full_fetch)
    assert algo.compute_single_action(obs, explore=False) == action
    _, again, _ = algo.compute_single_action(obs, state, explore=False)
    assert not np.allclose(again[0], state[0])  # the state moved on
    _, from_policy, _ = policy.compute_single_action(obs, initial, explore=False)
    np.testing.assert_allclose(from_policy[0], state[0])
    actions, states, _ = algo.compute_actions({"a": obs, "b": obs}, {"a": state}, explore=False)
    assert actions["b"] == action and set(states) == {"a", "b"}  # "b" starts an episode, as the first call did
    np.testing.assert_allclose(states["b"][0], from_policy[0], rtol=1e-5)
    np.testing.assert_allclose(states["a"][0], again[0], rtol=1e-5)
    algo.stop()


def test_a_restored_recurrent_policy_continues_exactly(tmp_path) -> None:
    algo = lstm_ppo().build()
    algo.train()
    checkpoint = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(checkpoint)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    state_a = state_b = algo.get_policy().get_initial_state()
    for _ in range(20):
        a, state_a, _ = algo.compute_single_action(obs, state_a, explore=False)
        b, state_b, _ = restored.compute_single_action(obs, state_b, explore=False)
        assert a == b
        np.testing.assert_allclose(state_a[1], state_b[1])
        obs, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            break
    algo.stop()
    restored.stop()


def test_where_recurrent_models_are_not_trained_the_error_says_where_they_are() -> None:
    with pytest.raises(ConfigError, match="PPO, A2C and IMPALA train them"):
        DQNConfig().environment("CartPole-v1").training(model=LSTM).build()
    with pytest.raises(ConfigError, match="gives every output itself: there is nothing to wrap"):
        lstm_ppo(custom_model="corral.core:LSTMModel").build()


class Features(torch.nn.Module):
    """A plain module: observations to features, as a custom model under use_lstm is written."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        super().__init__()
        self.layer = torch.nn.Linear(obs_space.shape[0], num_outputs)

    def forward(self, obs):
        return torch.relu(self.layer(obs))


def test_use_lstm_wraps_a_custom_model_whose_outputs_the_lstm_reads() -> None:
    algo = lstm_ppo(custom_model=Features, fcnet_hiddens=[12]).build()
    model = algo.get_policy().model
    assert isinstance(model.encoder, Features) and model.encoder.layer.out_features == 12 and model.lstm.input_size == 12
    before = model.encoder.layer.weight.detach().clone()
    algo.train()
    assert not torch.allclose(before, model.encoder.layer.weight)  # trained through the LSTM
    algo.stop()


@pytest.mark.slow
def test_lstm_ppo_learns_stateless_cartpole_which_needs_memory() -> None:
    # CartPole without the velocities: a feed-forward policy balances it poorly; the LSTM recovers them. The value
    # loss barely moves the shared LSTM, as in RLlib's LSTM example (vf_loss_coeff 1e-4): 36k steps, not 200k
    model = {"use_lstm": True, "lstm_cell_size": 64, "max_seq_len": 20, "fcnet_hiddens": [64]}
    config = PPOConfig().environment(StatelessCartPole).training(model=model, vf_loss_coeff=1e-4)
    algo = config.debugging(seed=0).build()
    best, steps = best_return_within(algo, 300_000, 150)
    algo.stop()
    assert best >= 150, f"mean return {best:.1f} after {steps} steps"


@pytest.mark.slow
def test_lstm_impala_learns_stateless_cartpole_with_v_trace_over_its_sequences() -> None:
    model = {"use_lstm": True, "lstm_cell_size": 64, "max_seq_len": 20, "fcnet_hiddens": [64]}
    config = IMPALAConfig().environment(StatelessCartPole).training(model=model, vf_loss_coeff=1e-4)
    algo = config.debugging(seed=0).build()
    best, steps = best_return_within(algo, 400_000, 150)
    algo.stop()
    assert best >= 150, f"mean return {best:.1f} after {steps} steps"


@pytest.mark.usefixtures("ray_on_two_cpus")
def test_remote_env_runners_carry_the_state_and_their_sequences_train_the_learner() -> None:
    algo = lstm_ppo(lstm_use_prev_reward=True).env_runners(num_env_runners=2).build()
    before = algo.get_policy().get_weights()
    result = algo.train()
    assert result["num_env_steps_trained"] == result["num_env_steps_sampled"] >= 256
    after = algo.get_policy().get_weights()
    assert any(not np.allclose(before[k], after[k]) for k in before if k.startswith("lstm."))
    algo.stop()


def test_impala_learns_on_whole_fragments_from_their_first_state_starting_over_with_each_episode() -> None:
    config = IMPALAConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=2, rollout_fragment_length=20)
    algo = config.training(train_batch_size=80, model=LSTM).debugging(seed=0).build()
    policy = algo.get_policy()
    runner = algo.env_runner_group.local_env_runner
    batch = SampleBatch.concat([runner.sample().policy_batches["default_policy"] for _ in range(3)])  # episodes end inside
    assert not batch[SampleBatch.VALID].all()
    t = policy.to_tensors(batch)
    with torch.no_grad():
        dist_inputs, _, _ = policy._recurrent_outputs(policy.model, t)
    steps, sequences = batch[SampleBatch.VALID].shape[1], batch.count
    logp = policy.dist_class(dist_inputs).logp(t[SampleBatch.ACTIONS].T.reshape(-1)).view(steps, sequences).T
    # the learner's model, run over each sequence from its first state, gives what the runner's gave step by step
    torch.testing.assert_close(logp, t[SampleBatch.ACTION_LOGP], rtol=0, atol=1e-5)
    before = policy.get_weights()
    result = algo.train()
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    assert any(not np.allclose(before[k], v) for k, v in policy.get_weights().items() if k.startswith("lstm."))
    algo.stop()


def test_evaluation_carries_the_state_through_its_episodes() -> None:
    algo = lstm_ppo().evaluation(evaluation_interval=1, evaluation_duration=2).build()
    result = algo.train()
    assert result["evaluation"]["episodes_this_iter"] >= 2
    carry = algo._evaluation_runners().local_env_runner._carry
    assert carry is not None and carry.policy is algo.get_policy() and np.any(carry.state[0])
    algo.stop()


def test_each_agent_carries_its_own_state_in_a_multi_agent_run() -> None:
    policies = {"p0", "p1"}
    config = (
        PPOConfig()
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .multi_agent(policies=policies, policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id}")
        .training(**SMALL_PPO, model=LSTM)
        .debugging(seed=0)
    )
    algo = config.build()
    fragments = []
    for pid in policies:
        policy = algo.get_policy(pid)
        original = policy.training_rows
        policy.training_rows = lambda fragment, original=original: fragments.append(fragment) or original(fragment)
    result = algo.train()
    assert result["num_agent_steps_trained"] == result["num_agent_steps_sampled"] >= 256
    checked = 0
    for fragment in fragments:
        valid, state_in, state_out = fragment[SampleBatch.VALID], fragment["state_in_0"], fragment["state_out_0"]
        for column in range(valid.shape[1]):
            for t in range(1, len(valid)):
                if valid[t][column] and valid[t - 1][column]:  # the agent's next step goes on from where it was
                    np.testing.assert_array_equal(state_in[t, column], state_out[t - 1, column])
                    checked += 1
                elif valid[t][column] and valid[: t - 1, column].any():  # after a reset row: a new episode
                    np.testing.assert_array_equal(state_in[t, column], 0.0)
                    checked += 1
    assert checked > 200
    algo.stop()


def test_a_recurrent_policy_acts_and_learns_within_an_action_mask() -> None:
    # MaskedChoiceEnv raises on an illegal action: sampling and evaluation finishing says the mask held
    algo = PPOConfig().environment(MaskedChoiceEnv).training(**SMALL_PPO, model=LSTM).debugging(seed=0).build()
    result = algo.train()
    assert result["num_env_steps_trained"] >= 256 and algo.get_policy().is_recurrent
    obs, _ = MaskedChoiceEnv().reset(seed=1)
    action, state, _ = algo.compute_single_action(obs, algo.get_policy().get_initial_state(), explore=False)
    assert obs["action_mask"][action] == 1 and len(state) == 2
    algo.stop()

"""``use_attention``: RLlib's GTrXL as a policy's memory, its state a window of past steps per unit."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral import ConfigError
from corral.core import ModelConfig, SampleBatch, build_model
from corral.core.networks.attention import AttentionModel, GRUGate
from corral.plugins.dqn import DQNConfig
from corral.plugins.impala import IMPALAConfig
from corral.plugins.ppo import PPOConfig
from corral.testing.envs import StatelessCartPole
from tests.conftest import SMALL_PPO, best_return_within

ATTENTION = {
    "use_attention": True,
    "attention_dim": 16,
    "attention_num_transformer_units": 2,
    "attention_num_heads": 2,
    "attention_head_dim": 8,
    "attention_memory_inference": 6,
    "attention_memory_training": 6,
    "attention_use_n_prev_actions": 1,
    "attention_use_n_prev_rewards": 1,
    "max_seq_len": 5,
    "fcnet_hiddens": [16],
}


def attention_model(**options: Any) -> AttentionModel:
    torch.manual_seed(0)
    model = build_model(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), 2, ModelConfig(**{**ATTENTION, **options}))
    assert isinstance(model, AttentionModel)
    return model


def inputs(sequences: int = 2, steps: int = 5) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    obs = torch.randn(sequences, steps, 3, generator=generator)
    state = [torch.randn(sequences, 6, 16, generator=generator) for _ in range(2)]
    prev_actions = torch.randint(0, 2, (sequences, steps), generator=generator)
    return obs, state, prev_actions, torch.randn(sequences, steps, generator=generator)


def test_training_on_a_sequence_gives_the_outputs_and_state_acting_step_by_step_gave() -> None:
    model = attention_model()
    assert [tuple(part.shape) for part in model.get_initial_state()] == [(6, 16), (6, 16)]
    assert all(not part.any() for part in model.get_initial_state()), "zeros at an episode's start"
    obs, state, prev_actions, prev_rewards = inputs()
    with torch.no_grad():
        trained = model.forward_train(obs, state, torch.tensor([5, 3]), prev_actions, prev_rewards)
        carried = [part.clone() for part in state]
        after: dict[int, list[torch.Tensor]] = {}
        acted = []
        for t in range(5):
            out = model.forward_inference(obs[:, t], carried, None, prev_actions[:, t], prev_rewards[:, t])
            acted.append(out[SampleBatch.ACTION_DIST_INPUTS])
            carried = [out["state_out_0"], out["state_out_1"]]
            after[t + 1] = carried
    # each step attends to the same window of past steps either way: training gives what acting gave
    trained_rows = trained[SampleBatch.ACTION_DIST_INPUTS].reshape(2, 5, 2)
    acted_rows = torch.stack(acted, dim=1)
    torch.testing.assert_close(trained_rows[0], acted_rows[0])
    torch.testing.assert_close(trained_rows[1, :3], acted_rows[1, :3])
    for unit in range(2):  # each sequence's state after its last real step: 5 steps, then 3
        torch.testing.assert_close(trained[f"state_out_{unit}"][0], after[5][unit][0])
        torch.testing.assert_close(trained[f"state_out_{unit}"][1], after[3][unit][1])
    first_input = after[1][0][:, -1]
    assert not torch.allclose(first_input, state[0][:, -1]), "the newest entry is the step just taken"
    torch.testing.assert_close(after[1][0][:, :-1], state[0][:, 1:], msg="the oldest entry leaves the window")


def test_a_step_attends_only_to_its_past_so_padding_and_later_steps_change_nothing_before_them() -> None:
    model = attention_model()
    obs, state, prev_actions, prev_rewards = inputs(sequences=1)
    with torch.no_grad():
        full = model.forward_train(obs, state, torch.tensor([5]), prev_actions, prev_rewards)
        changed = obs.clone()
        changed[:, 3:] = 9.0  # later steps, or padding after a sequence of three
        padded = model.forward_train(changed, state, torch.tensor([3]), prev_actions, prev_rewards)
    torch.testing.assert_close(padded[SampleBatch.ACTION_DIST_INPUTS][:3], full[SampleBatch.ACTION_DIST_INPUTS][:3])
    torch.testing.assert_close(padded[SampleBatch.VF_PREDS][:3], full[SampleBatch.VF_PREDS][:3])
    assert not torch.allclose(padded[SampleBatch.ACTION_DIST_INPUTS][3:], full[SampleBatch.ACTION_DIST_INPUTS][3:])


def test_training_attends_to_the_last_attention_memory_training_entries_of_the_state() -> None:
    short = attention_model(attention_memory_training=2)
    obs, state, prev_actions, prev_rewards = inputs(sequences=1)
    older = [part.clone() for part in state]
    for part in older:
        part[:, :4] = 5.0  # only entries the training window leaves out differ
    with torch.no_grad():
        seq_lens = torch.tensor([5])
        same = short.forward_train(obs, state, seq_lens, prev_actions, prev_rewards)[SampleBatch.ACTION_DIST_INPUTS]
        torch.testing.assert_close(
            short.forward_train(obs, older, seq_lens, prev_actions, prev_rewards)[SampleBatch.ACTION_DIST_INPUTS], same
        )
        acting = short.forward_inference(obs[:, 0], state, None, prev_actions[:, 0], prev_rewards[:, 0])
        acting_older = short.forward_inference(obs[:, 0], older, None, prev_actions[:, 0], prev_rewards[:, 0])
    assert not torch.allclose(acting[SampleBatch.ACTION_DIST_INPUTS], acting_older[SampleBatch.ACTION_DIST_INPUTS])


def test_a_gru_gate_biased_high_passes_its_input_through() -> None:
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(GRUGate(8, bias=50.0)(x, y), x)
    assert not torch.allclose(GRUGate(8, bias=-50.0)(x, y), x)


def test_ppo_and_impala_train_an_attention_model_and_it_acts_with_its_state() -> None:
    model = {**ATTENTION, "attention_num_transformer_units": 1}
    for config in (
        PPOConfig().training(**SMALL_PPO, model=model),
        IMPALAConfig().training(model=model, train_batch_size=80).env_runners(rollout_fragment_length=20),
    ):
        algo = config.environment(StatelessCartPole).debugging(seed=0).build()
        try:
            policy = algo.get_policy()
            before = {k: v.copy() for k, v in policy.get_weights().items() if k.startswith("units.")}
            assert algo.train()["num_env_steps_trained"] > 0
            after = policy.get_weights()
            assert any(not np.allclose(before[k], after[k]) for k in before), "the transformer learns"
            action, state, _ = algo.compute_single_action(np.zeros(2, np.float32), policy.get_initial_state(), explore=False)
            assert action in (0, 1) and [part.shape for part in state] == [(6, 16)]
            assert not state[0][:-1].any() and state[0][-1].any(), "the first step's inputs join a zero memory"
        finally:
            algo.stop()


def test_attention_is_refused_where_a_policy_learns_on_single_steps() -> None:
    with pytest.raises(ConfigError, match="cannot train a recurrent model"):
        DQNConfig().environment("CartPole-v1").training(model=ATTENTION).build()


@pytest.mark.slow
def test_attention_ppo_learns_stateless_cartpole_where_the_same_config_without_memory_does_not() -> None:
    # RLlib's attention example's PPO setting: the value loss barely moves the shared transformer (vf_loss_coeff 1e-5)
    model = {
        "use_attention": True,
        "max_seq_len": 10,
        "attention_dim": 32,
        "attention_memory_inference": 10,
        "attention_memory_training": 10,
        "fcnet_hiddens": [64],
    }
    config = PPOConfig().environment(StatelessCartPole).training(model=model, vf_loss_coeff=1e-5).debugging(seed=0)
    algo = config.build()
    best, steps = best_return_within(algo, 500_000, 150)
    algo.stop()
    assert best >= 150, f"mean return {best:.1f} after {steps} steps"
    feed_forward = config.copy().training(model={"use_attention": False}).build()
    ff_best, ff_steps = best_return_within(feed_forward, steps, float("inf"))
    feed_forward.stop()
    assert ff_best < 100, f"without memory, mean return {ff_best:.1f} after {ff_steps} steps: the env does not need memory"

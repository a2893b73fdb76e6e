"""RLlib's recurrent ModelV2 (``RecurrentNetwork``, ``forward_rnn``), written as an RLlib user writes one, trained by corral."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from corral import ConfigError
from corral.core import ModelCatalog, RecurrentNetwork
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPOConfig
from corral.testing.envs import RepeatAfterMe

NAME = "rllib_style_rnn"


class RLlibStyleRNN(RecurrentNetwork, nn.Module):
    """A dense layer, an LSTM and two heads, in the shape of RLlib's recurrent custom-model examples."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, hidden=32, cell=32):
        nn.Module.__init__(self)
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.cell = cell
        self.dense = nn.Linear(int(np.prod(obs_space.shape)), hidden)
        self.lstm = nn.LSTM(hidden, cell, batch_first=True)
        self.logits = nn.Linear(cell, num_outputs)
        self.values = nn.Linear(cell, 1)
        self._features = None

    def get_initial_state(self):
        return [self.dense.weight.new_zeros(self.cell), self.dense.weight.new_zeros(self.cell)]

    def forward_rnn(self, inputs, state, seq_lens):
        x = torch.relu(self.dense(inputs))
        self._features, (h, c) = self.lstm(x, (state[0].unsqueeze(0), state[1].unsqueeze(0)))
        return self.logits(self._features), [h.squeeze(0), c.squeeze(0)]

    def value_function(self):
        return self.values(self._features).reshape(-1)


ModelCatalog.register_custom_model(NAME, RLlibStyleRNN)


def ppo(**training: object) -> PPOConfig:
    return (
        PPOConfig()
        .environment(RepeatAfterMe)
        .env_runners(num_envs_per_env_runner=4)
        .training(model={"custom_model": NAME, "max_seq_len": 10}, **training)
        .debugging(seed=0)
    )


def test_a_recurrent_model_v2_acts_with_its_state_and_trains_on_sequences() -> None:
    algo = ppo(train_batch_size=400, minibatch_size=100, num_epochs=1).build()
    policy = algo.get_policy()
    assert isinstance(policy.model, RLlibStyleRNN) and policy.is_recurrent
    action, state, extras = algo.compute_single_action(1, policy.get_initial_state(), explore=False)
    assert action in (0, 1) and [part.shape for part in state] == [(32,), (32,)] and "vf_preds" in extras
    result = algo.train()
    assert result["num_env_steps_trained"] == result["num_env_steps_sampled"] >= 400
    algo.stop()


def test_dqn_refuses_a_recurrent_model_v2_and_names_what_trains_one() -> None:
    with pytest.raises(ConfigError, match=r"is recurrent .* PPO, A2C and IMPALA train recurrent models"):
        DQNConfig().environment(RepeatAfterMe).training(model={"custom_model": NAME}).build()


@pytest.mark.slow
def test_a_recurrent_model_v2_learns_to_repeat_what_it_saw() -> None:
    # a policy without memory earns 0 on average; one that remembers the last bit earns 99 of 100 steps
    algo = ppo(lr=0.003, num_epochs=5, entropy_coeff=0.0, vf_loss_coeff=0.01).build()
    steps, best = 0, -100.0
    while steps < 100_000 and best < 60:
        result = algo.train()
        steps, best = result["num_env_steps_sampled"], max(best, result["episode_reward_mean"])
    algo.stop()
    assert best >= 60, f"mean return {best:.1f} after {steps} steps"

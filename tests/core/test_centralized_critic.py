"""A PPO policy subclass written to RLlib's ``PPOTorchPolicy`` protocol: a centralized critic, as RLlib's example.

The subclass overrides the per-trajectory ``postprocess_trajectory(sample_batch,
other_agent_batches, episode)`` (to record the opponent's observations and
actions and compute advantages over a critic that sees them) and
``loss(model, dist_class, train_batch)`` (to make PPO's loss read that critic).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import corral
from corral import ConfigError, PolicySpec, SampleBatch
from corral.core.networks.model_v2 import TorchModelV2
from corral.plugins.ppo import PPOPolicy
from corral.rllib.evaluation.postprocessing import Postprocessing, compute_advantages
from corral.testing.example_envs.games import TwoStepGame

OPPONENT_OBS = "opponent_obs"
OPPONENT_ACTION = "opponent_action"


class CriticSeeingBoth(TorchModelV2):
    """A policy over the agent's own one-hot state, and a value over both agents' states and the opponent's action."""

    def __init__(self, obs_space: Any, action_space: Any, num_outputs: int, model_config: dict[str, Any], name: str) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.actor = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, num_outputs))
        self.own_value = nn.Linear(6, 1)
        self.central = nn.Sequential(nn.Linear(6 + 6 + 2, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, input_dict: Any, state: list[Any], seq_lens: Any) -> tuple[torch.Tensor, list[Any]]:
        self._obs = input_dict["obs_flat"].float()
        return self.actor(self._obs), state

    def value_function(self) -> torch.Tensor:
        return self.own_value(self._obs).reshape(-1)

    def central_value_function(self, obs: torch.Tensor, opponent_obs: torch.Tensor, opponent_actions: Any) -> torch.Tensor:
        opponent = nn.functional.one_hot(opponent_actions.long(), 2).float()
        return self.central(torch.cat([obs.float(), opponent_obs.float(), opponent], 1)).reshape(-1)


class CentralizedCriticPolicy(PPOPolicy):
    """RLlib's ``CCPPOTorchPolicy``, recording what corral hands it."""

    postprocessed: ClassVar[list[tuple[Any, int, dict[Any, Any], Any]]] = []
    loss_columns: ClassVar[list[set[str]]] = []

    def postprocess_trajectory(self, sample_batch: Any, other_agent_batches: Any = None, episode: Any = None) -> Any:
        CentralizedCriticPolicy.postprocessed.append((self, sample_batch.count, dict(other_agent_batches), episode))
        [entry] = other_agent_batches.values()  # (policy_id, policy, batch); (policy, batch) with enable_connectors=False
        opponent = entry[-1]
        sample_batch[OPPONENT_OBS] = opponent[SampleBatch.OBS]
        sample_batch[OPPONENT_ACTION] = opponent[SampleBatch.ACTIONS]
        with torch.no_grad():
            values = self.model.central_value_function(
                *(torch.as_tensor(sample_batch[key]) for key in (SampleBatch.OBS, OPPONENT_OBS, OPPONENT_ACTION))
            )
        sample_batch[SampleBatch.VF_PREDS] = values.numpy()
        last_r = 0.0 if sample_batch[SampleBatch.TERMINATEDS][-1] else float(values[-1])
        config = self.config
        return compute_advantages(sample_batch, last_r, config["gamma"], config["lambda"], use_gae=config["use_gae"])

    def loss(self, model: Any, dist_class: Any, train_batch: Any) -> torch.Tensor:
        CentralizedCriticPolicy.loss_columns.append(set(train_batch))
        own_values = model.value_function
        model.value_function = lambda: model.central_value_function(
            train_batch[SampleBatch.OBS], train_batch[OPPONENT_OBS], train_batch[OPPONENT_ACTION]
        )
        try:
            return super().loss(model, dist_class, train_batch)
        finally:
            model.value_function = own_values


def _config(**training: Any) -> Any:
    spec = PolicySpec(CentralizedCriticPolicy, gym.spaces.Discrete(6), TwoStepGame.action_space)
    return (
        corral.get_config("PPO")
        .environment(TwoStepGame)
        .env_runners(batch_mode="complete_episodes", num_envs_per_env_runner=1, rollout_fragment_length=20)
        .training(model={"custom_model": CriticSeeingBoth}, **training)
        .multi_agent(policies={"pol1": spec, "pol2": spec}, policy_mapping_fn=lambda agent_id, *a, **k: f"pol{agent_id + 1}")
        .debugging(seed=0)
    )


@pytest.fixture(autouse=True)
def _fresh_records() -> None:
    CentralizedCriticPolicy.postprocessed.clear()
    CentralizedCriticPolicy.loss_columns.clear()


def test_each_agent_s_episode_is_postprocessed_with_the_other_agent_s_and_its_columns_reach_the_loss(make_algo) -> None:
    algo = make_algo(_config(train_batch_size=40, minibatch_size=20, num_epochs=1))
    model = algo.get_policy("pol1").model
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    result = algo.train()
    moved = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert {"central.0.weight", "actor.0.weight"} <= moved, "the swapped-in critic is what PPO's value loss trained"
    assert not moved & {"own_value.weight", "own_value.bias"}, "the model's own value head is out of the loss"
    calls = CentralizedCriticPolicy.postprocessed
    assert calls and all(count == 2 for _, count, _, _ in calls), "one call per agent and two-step episode"
    for policy, _, others, episode in calls:
        ((other_agent, (other_id, other_policy, rows)),) = others.items()
        assert other_id == f"pol{other_agent + 1}" and other_policy is not policy and rows.count == 2 and episode is not None
        assert other_policy is algo.get_policy(f"pol{other_agent + 1}")
    by_episode: dict[int, list[Any]] = {}
    for policy, _, _, episode in calls:
        by_episode.setdefault(id(episode), []).append(policy)
    assert all(len(policies) == 2 and policies[0] is not policies[1] for policies in by_episode.values())
    assert CentralizedCriticPolicy.loss_columns, "the override computed the minibatches' loss"
    wanted = {OPPONENT_OBS, OPPONENT_ACTION, Postprocessing.ADVANTAGES}
    assert all(wanted <= columns for columns in CentralizedCriticPolicy.loss_columns)
    stats = result["info"]["learner"]["pol1"]["learner_stats"]
    assert np.isfinite(stats["vf_loss"]) and np.isfinite(stats["vf_explained_var"])


def test_the_opponent_s_rows_are_those_of_the_same_episode(make_algo) -> None:
    algo = make_algo(_config(train_batch_size=40, minibatch_size=20, num_epochs=1))
    algo.train()
    for policy, _, others, _ in CentralizedCriticPolicy.postprocessed:
        ((_, (*_, rows)),) = others.items()
        # TwoStepGame: agent 0 sees states 0-2, agent 1 states 3-5; both see the same state at each step
        own_first = 0 if policy is algo.get_policy("pol1") else 3
        assert rows[SampleBatch.OBS].shape == (2, 6)
        assert int(np.argmax(rows[SampleBatch.OBS][0])) == 3 - own_first, "the other agent's first step, in state 0"


def test_a_single_agent_run_postprocesses_each_episode_s_rows_with_its_episode(make_algo) -> None:
    calls: list[tuple[int, bool, Any, dict[Any, Any]]] = []

    class PerEpisode(PPOPolicy):
        def postprocess_trajectory(self, sample_batch: Any, other_agent_batches: Any = None, episode: Any = None) -> Any:
            ended = bool((sample_batch[SampleBatch.TERMINATEDS] | sample_batch[SampleBatch.TRUNCATEDS])[-1])
            calls.append((sample_batch.count, ended, episode, dict(other_agent_batches)))
            return compute_advantages(sample_batch, 0.0, 0.99, 0.95)

    config = (
        corral.get_config("PPO")
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=100)
        .training(train_batch_size=200, minibatch_size=100, num_epochs=1)
        .multi_agent(policies={"default_policy": PolicySpec(PerEpisode)})
        .debugging(seed=0)
    )
    algo = make_algo(config)
    algo.train()
    assert sum(count for count, *_ in calls) == algo.counters["num_env_steps_sampled"]
    assert all(episode is not None and others == {} for _, _, episode, others in calls)
    ended = [call for call in calls if call[1]]
    assert ended and all(count == episode.length for count, _, episode, _ in ended), "a finished episode's rows, whole"
    assert len({id(episode) for _, _, episode, _ in ended}) == len(ended), "each finished episode postprocessed once"


def test_a_loss_override_beside_a_learner_class_is_refused_since_each_replaces_the_loss(make_algo) -> None:
    from corral.plugins.ppo import PPOTorchLearner

    with pytest.raises(ConfigError, match=r"CentralizedCriticPolicy overrides RLlib's Policy.loss.*learner_class "
                       r"\(PPOTorchLearner\).*keep one"):  # fmt: skip
        make_algo(_config(learner_class=PPOTorchLearner))


@pytest.mark.slow
def test_the_centralized_critic_learns_the_two_step_game_s_best_joint_action(make_algo) -> None:
    algo = make_algo(_config(train_batch_size=400, minibatch_size=100, num_epochs=10, lr=3e-3))
    best = -np.inf
    for _ in range(30):
        best = max(best, algo.train()["episode_reward_mean"])
        if best >= 7.9:
            break
    assert best >= 7.9, f"the optimum is 8 (both agents choose state 2, then action 1); reached {best}"

"""Policies written by hand to RLlib's Policy API act in corral's samplers as RLlib's samplers ran them."""

from __future__ import annotations

import random
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral import ConfigError, PolicySpec
from corral.core.learning.policies.heuristic_policies import ViewRequirement, follows_rllib_protocol
from corral.core.learning.policy import Policy
from corral.testing.example_envs.games import RockPaperScissors


class StickToOneMove(Policy):
    """RLlib's AlwaysSameHeuristic, as RLlib's examples write it: a move drawn at each episode's start, kept as state."""

    drawn: ClassVar[list[int]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exploration = self._create_exploration()
        self.view_requirements.update(
            {"state_in_0": ViewRequirement("state_out_0", shift=-1, space=gym.spaces.Box(0, 2, (1,), np.int32))}
        )

    def get_initial_state(self):
        move = random.choice([0, 1, 2])
        StickToOneMove.drawn.append(move)
        return [move]

    def is_recurrent(self) -> bool:
        return True

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None, **kwargs):
        return list(state_batches[0]), state_batches, {}


class BeatTheLastMove(Policy):
    """RLlib's BeatLastHeuristic: reads the observation as the env gives it (the opponent's last move)."""

    seen: ClassVar[list[Any]] = []

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None, **kwargs):
        BeatTheLastMove.seen.append((np.asarray(obs_batch).copy(), state_batches, kwargs.get("explore")))
        assert isinstance(self.observation_space, gym.spaces.Discrete)
        return [(int(x) + 1) % 3 for x in obs_batch], [], {}


def _config(policies: dict[str, PolicySpec], mapping: Any, num_envs: int = 2) -> Any:
    return (
        corral.get_config("PPO")
        .environment(RockPaperScissors)
        .env_runners(num_envs_per_env_runner=num_envs, rollout_fragment_length=20)
        .training(train_batch_size=80, minibatch_size=40, num_epochs=1)
        .multi_agent(policies=policies, policy_mapping_fn=mapping, policies_to_train=["learned"])
        .debugging(seed=0)
    )


def test_a_policy_is_told_apart_by_rllib_s_state_batches_parameter() -> None:
    assert follows_rllib_protocol(BeatTheLastMove.__new__(BeatTheLastMove))
    assert not follows_rllib_protocol(Policy.__new__(Policy))


def test_a_stateful_heuristic_draws_its_state_at_each_episode_start_and_keeps_it_through_the_episode(make_algo) -> None:
    StickToOneMove.drawn.clear()
    random.seed(3)
    policies = {"same": PolicySpec(policy_class=StickToOneMove), "learned": PolicySpec()}
    mapping = lambda agent_id, *a, **k: "same" if agent_id == "player1" else "learned"  # noqa: E731
    algo = make_algo(_config(policies, mapping, num_envs=1))
    same = algo.env_runner_group.local_env_runner.sample(80).policy_batches["same"]
    ends = np.flatnonzero(same["terminateds"]) + 1
    moves_by_episode = [set(episode.tolist()) for episode in np.split(same["actions"], ends)[: len(ends)]]
    assert len(moves_by_episode) >= 6 and all(len(moves) == 1 for moves in moves_by_episode)
    assert len(set().union(*moves_by_episode)) > 1, "each episode draws its move anew, as in RLlib"
    assert len(StickToOneMove.drawn) >= len(moves_by_episode)
    assert algo.get_policy("same").is_recurrent() is False  # corral's flag, also callable: its model has no memory
    result = algo.train()
    assert "learned" in result["info"]["learner"] and "same" not in result["info"]["learner"]


def test_a_heuristic_reads_the_env_s_observations_and_its_actions_are_the_ones_played(make_algo) -> None:
    BeatTheLastMove.seen.clear()
    policies = {"beat_last": PolicySpec(policy_class=BeatTheLastMove), "learned": PolicySpec()}
    algo = make_algo(_config(policies, lambda agent_id, *a, **k: "beat_last" if agent_id == "player1" else "learned"))
    batch = algo.env_runner_group.local_env_runner.sample(40).policy_batches["beat_last"]
    obs_batch, state_batches, explore = BeatTheLastMove.seen[-1]
    assert obs_batch.shape == (2,) and obs_batch.dtype.kind == "i" and state_batches == [] and explore is True
    observed = batch["obs"].argmax(axis=1)  # one-hot in the batch, as corral's models read it
    assert len(observed) >= 40 and np.array_equal(batch["actions"], (observed + 1) % 3)


def test_a_view_requirement_corral_does_not_provide_is_refused_naming_those_it_does(make_algo) -> None:
    class WantsAWindow(BeatTheLastMove):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.view_requirements["prev_obs"] = ViewRequirement("obs", shift="-5:-1")

    policies = {"window": PolicySpec(policy_class=WantsAWindow), "learned": PolicySpec()}
    with pytest.raises(ConfigError, match=r"WantsAWindow.view_requirements\['prev_obs'\] asks for 'obs' at shift '-5:-1'.*"
                       r"prev_actions \(actions, shift -1\)"):  # fmt: skip
        make_algo(_config(policies, lambda agent_id, *a, **k: "window" if agent_id == "player1" else "learned"))


def test_a_heuristic_that_returns_too_few_actions_is_told_rllib_s_protocol(make_algo) -> None:
    class OneActionOnly(BeatTheLastMove):
        def compute_actions(self, obs_batch, state_batches=None, *args, **kwargs):
            return [0], [], {}

    policies = {"one": PolicySpec(policy_class=OneActionOnly), "learned": PolicySpec()}
    algo = make_algo(_config(policies, lambda agent_id, *a, **k: "one" if agent_id == "player1" else "learned"))
    with pytest.raises(ValueError, match=r"returned actions with shape \(1,\) for 2 observations: RLlib's protocol"):
        algo.env_runner_group.local_env_runner.sample(20)


class PushOneWay(Policy):
    """A single-agent heuristic that pushes the cart one way, drawn at each episode's start."""

    drawn: ClassVar[list[int]] = []

    def get_initial_state(self):
        PushOneWay.drawn.append(random.choice([0, 1]))
        return [np.int64(PushOneWay.drawn[-1])]

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None, **kwargs):
        assert np.asarray(obs_batch).shape == (len(state_batches[0]), 4)  # CartPole's observations, stacked
        return state_batches[0].copy(), state_batches, {}


def test_the_single_agent_runner_acts_with_a_heuristic_the_algorithm_names_too(make_algo) -> None:
    from corral.plugins.ppo import PPO

    class HeuristicPPO(PPO):
        @classmethod
        def get_default_policy_class(cls, config):
            return PushOneWay

    random.seed(0)
    config = corral.get_config("PPO").environment("CartPole-v1").env_runners(num_envs_per_env_runner=2)
    algo = make_algo(HeuristicPPO.get_default_config().update_from_dict(config.to_dict()).debugging(seed=0))
    runner = algo.env_runner_group.local_env_runner
    assert isinstance(runner.policy, PushOneWay)
    PushOneWay.drawn.clear()
    batch = runner.sample(400).policy_batches["default_policy"]
    assert np.array_equal(batch["actions"], batch["state_in_0"]), "it acted on the state it was carried"
    ended = int((batch["terminateds"] | batch["truncateds"]).sum())
    assert ended >= 10 and len(PushOneWay.drawn) >= ended, "a new direction is drawn at each episode's start"
    assert set(batch["actions"].tolist()) == {0, 1}


def test_rllib_overrides_corral_cannot_honour_are_refused_naming_corral_s_ways(make_algo) -> None:
    """RLlib's loss(...) on a policy whose update has no such loss, and per-trajectory postprocessing with a recurrent
    model (it learns on sequences cut from whole fragments): refused. A heuristic's postprocessing is called."""
    from corral.plugins.a2c import A2CPolicy
    from corral.plugins.ppo import PPOPolicy

    class CentralLoss(A2CPolicy):
        def loss(self, model, dist_class, train_batch):
            return super().loss(model, dist_class, train_batch)

    class CentralPostprocessing(PPOPolicy):
        def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
            return sample_batch

    class BeatTheLastMoveAsIs(BeatTheLastMove):  # a heuristic postprocesses as RLlib's do
        calls: ClassVar[list[int]] = []

        def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
            BeatTheLastMoveAsIs.calls.append(sample_batch.count)
            return sample_batch

    def build(policy_class: type, **custom: Any) -> Any:
        policies = {"custom": PolicySpec(policy_class=policy_class, config=custom), "learned": PolicySpec()}
        return make_algo(_config(policies, lambda agent_id, *a, **k: "custom" if agent_id == "player1" else "learned"))

    with pytest.raises(ConfigError, match=r"CentralLoss overrides RLlib's Policy.loss\(model, dist_class, train_batch\), "
                       r"which A2CPolicy does not compute its update with.*compute_loss_for_module"):  # fmt: skip
        build(CentralLoss)
    with pytest.raises(ConfigError, match=r"CentralPostprocessing overrides RLlib's postprocess_trajectory\(sample_batch, "
                       r"other_agent_batches, episode\) and has a recurrent model.*on_postprocess_trajectory"):  # fmt: skip
        build(CentralPostprocessing, model={"use_lstm": True})
    algo = build(BeatTheLastMoveAsIs)
    algo.train()
    assert BeatTheLastMoveAsIs.calls and max(BeatTheLastMoveAsIs.calls) <= 10, "called per episode (10 moves each)"

"""config.multi_agent(): the forms RLlib users write, validation that names the policy, and the dict round trip."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import yaml

from corral import ConfigError, PolicySpec
from corral.core.contracts.multi_agent_config import policy_config
from corral.plugins.ppo import PPOConfig, PPOPolicy

BOX = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def ppo() -> PPOConfig:
    return PPOConfig().environment("CartPole-v1")


def map_agent(agent_id: Any, episode: Any, **kwargs: Any) -> str:
    """Agents 0, 2, ... to "even", the others to "odd"."""
    return "even" if agent_id % 2 == 0 else "odd"


def train_even(policy_id: str, batch: Any = None) -> bool:
    return policy_id == "even"


def test_policies_as_a_set_of_ids_with_a_mapping_and_the_ids_to_train() -> None:
    config = ppo().multi_agent(policies={"odd", "even"}, policy_mapping_fn=map_agent, policies_to_train={"even"})
    assert config.policies == {"even": PolicySpec(), "odd": PolicySpec()}
    assert list(config.policies) == ["even", "odd"]
    assert config.policy_mapping_fn is map_agent and config.policies_to_train == ["even"]
    assert config.is_multi_agent
    config.validate()


def test_policies_as_specs_tuples_and_none_with_functions_by_path() -> None:
    config = ppo().multi_agent(
        policies={"a": PolicySpec(config={"lr": 1e-4}), "b": (PPOPolicy, BOX, gym.spaces.Discrete(2), None), "c": None},
        policy_mapping_fn="tests.core.test_multi_agent_config:map_agent",
        policies_to_train="tests.core.test_multi_agent_config:train_even",
    )
    assert config.policies["b"] == PolicySpec(PPOPolicy, BOX, gym.spaces.Discrete(2))
    assert config.policy_mapping_fn is map_agent and config.policies_to_train is train_even
    config.validate()


def test_a_policy_trains_with_its_own_options_on_top_of_the_algorithms() -> None:
    config = (
        PPOConfig()
        .training(lr=1e-3, gamma=0.99)
        .multi_agent(policies={"fast": PolicySpec(config={"lr": 5e-3, "lambda": 0.9}), "slow": None})
    )
    fast, slow = policy_config(config, "fast"), policy_config(config, "slow")
    assert (fast.lr, fast.lambda_, fast.gamma) == (5e-3, 0.9, 0.99)
    assert (slow.lr, slow.lambda_) == (1e-3, 0.95)
    assert not fast.is_multi_agent and config.lr == 1e-3, "the algorithm's own config is unchanged"


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"lrr": 0.1}, r"policies\['p'\]\.config: PPOConfig has no option 'lrr'\. Did you mean 'lr'\?"),
        ({"lr": -1.0}, r"policies\['p'\]\.config: .*lr"),
        ({"num_env_runners": 2}, r"policies\['p'\]\.config sets \['num_env_runners'\], which every policy shares"),
        ({"minibatch_size": 10_000}, r"policies\['p'\]\.config: .*minibatch_size"),
    ],
    ids=["unknown", "bad-value", "shared-group", "bad-combination"],
)
def test_a_policys_bad_options_are_refused_naming_the_policy(overrides: dict, match: str) -> None:
    config = ppo().multi_agent(policies={"p": PolicySpec(config=overrides)})
    with pytest.raises(ConfigError, match=match):
        config.validate()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"policies": 3}, "policies must be a set of policy ids or a dict of ids to PolicySpec, not int"),
        ({"policies": {"": None}}, "the policy id '' is not a non-empty string"),
        ({"policies": {"p": (None, "Box")}}, "policy 'p': observation_space must be a gymnasium space or None, not str"),
        ({"policy_mapping_fn": 3}, "policy_mapping_fn must be a function or its 'module:qualname', not int"),
        ({"policy_mapping_fn": "tests.core.test_multi_agent_config:nothing"}, "has no attribute 'nothing'"),
        ({"policies_to_train": [1, 2]}, "policies_to_train must be policy ids"),
        ({"count_steps_by": "steps"}, "count_steps_by"),
        ({"policy_map_capacity": 0}, "policy_map_capacity"),
    ],
)
def test_bad_multi_agent_options_are_refused_when_given(options: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ppo().multi_agent(**options)


def test_policies_to_train_must_name_policies_that_exist() -> None:
    config = ppo().multi_agent(policies={"a", "b"}, policies_to_train=["a", "c"])
    with pytest.raises(ConfigError, match=r"policies_to_train names \['c'\], which are not in policies: \['a', 'b'\]"):
        config.validate()


def test_a_multi_agent_config_round_trips_through_json_and_yaml() -> None:
    config = ppo().multi_agent(
        policies={"even": PolicySpec(PPOPolicy, BOX, gym.spaces.Discrete(3), {"gamma": 0.9}), "odd": None},
        policy_mapping_fn=map_agent,
        policies_to_train=["even"],
        count_steps_by="agent_steps",
    )
    data = config.to_dict()
    assert data["policy_mapping_fn"] == "tests.core.test_multi_agent_config:map_agent"
    assert data["policies"]["even"]["policy_class"] == "corral.plugins.ppo.policy:PPOPolicy"
    for text in (json.dumps(data), yaml.safe_dump(data)):
        back = PPOConfig.from_dict(yaml.safe_load(text))
        assert back.policies == config.policies
        assert (back.policy_mapping_fn, back.policies_to_train, back.count_steps_by) == (map_agent, ["even"], "agent_steps")


def test_the_one_default_policy_is_still_single_agent_and_trains(tmp_path) -> None:
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size=64, minibatch_size=32, num_epochs=1)
        .env_runners(num_envs_per_env_runner=2)
        .multi_agent(policies={"default_policy"})
        .reporting(storage_path=str(tmp_path))
    )
    assert not config.is_multi_agent
    algo = config.build()
    assert algo.train()["training_iteration"] == 1
    algo.stop()

"""RLlib's VectorEnv and BaseEnv: envs polled as RLlib's samplers polled them, with RLlib's layout and resets."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral.rllib.env.base_env import ASYNC_RESET_RETURN, BaseEnv, convert_to_base_env, with_dummy_agent_id
from corral.rllib.env.multi_agent_env import MultiAgentEnvWrapper, make_multi_agent
from corral.rllib.env.vector_env import VectorEnv, VectorEnvWrapper


class Counter(gym.Env):
    """Observes its step count; terminates after ``length`` steps; raises on action 9."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(10)

    def __init__(self, length: int = 3) -> None:
        self.length, self.t = length, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        self.t = 0
        return np.array([0.0], np.float32), {"reset": True}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        if action == 9:
            raise RuntimeError("broken")
        self.t += 1
        return np.array([self.t], np.float32), float(action), self.t >= self.length, False, {}


def test_a_gymnasium_env_is_polled_with_rllib_s_layout_and_the_caller_resets_what_ended() -> None:
    made: list[int] = []

    def make(index: int) -> Counter:
        made.append(index)
        return Counter(length=2 + index)

    base = convert_to_base_env(Counter(length=2), make_env=make, num_envs=2)
    assert isinstance(base, VectorEnvWrapper) and isinstance(base, BaseEnv) and made == [1]
    obs, _, terminateds, truncateds, infos, off_policy = base.poll()  # the first poll resets every one
    assert list(obs) == [0, 1] and obs[0]["agent0"][0] == 0.0 and infos[1] == {"agent0": {"reset": True}}
    assert terminateds == truncateds == {0: {"__all__": False}, 1: {"__all__": False}} and off_policy == {}
    assert base.poll()[0] == {}, "each result is returned once"
    for _ in range(2):
        base.send_actions({0: {"agent0": 1}, 1: {"agent0": 2}})
    obs, rewards, terminateds, *_ = base.poll()
    assert rewards == {0: {"agent0": 1.0}, 1: {"agent0": 2.0}}
    assert terminateds == {0: {"__all__": True}, 1: {"__all__": False}}  # sub-env 1 runs 3 steps
    assert base.try_reset(0) == ({0: {"agent0": np.array([0.0], np.float32)}}, {0: {"agent0": {"reset": True}}})
    assert base.get_sub_environments()[1].length == 3 and set(base.get_sub_environments(as_dict=True)) == {0, 1}
    assert base.get_agent_ids() == {"agent0"} and base.observation_space == Counter.observation_space
    with pytest.raises(KeyError, match=r"no action for sub-environment\(s\) \[1\]"):
        base.send_actions({0: {"agent0": 1}})


def test_a_sub_environment_that_fails_is_made_anew_only_where_asked_and_reports_its_error() -> None:
    strict = VectorEnv.vectorize_gym_envs(existing_envs=[Counter()], num_envs=1)
    strict.vector_reset()
    with pytest.raises(RuntimeError, match="broken"):
        strict.vector_step([9])
    tolerant = VectorEnv.vectorize_gym_envs(make_env=lambda i: Counter(), num_envs=2, restart_failed_sub_environments=True)
    tolerant.vector_reset()
    first = tolerant.get_sub_environments()[0]
    obs, rewards, terminateds, truncateds, _ = tolerant.vector_step([9, 1])
    assert isinstance(obs[0], RuntimeError) and rewards == [0.0, 1.0] and terminateds == [True, False]
    assert tolerant.get_sub_environments()[0] is not first and truncateds[0]
    with pytest.raises(ValueError, match=r"pass make_env"):
        VectorEnv.vectorize_gym_envs(existing_envs=[Counter()], num_envs=2)


def test_a_vector_env_subclass_written_for_rllib_is_polled_through_its_own_methods() -> None:
    class Doubling(VectorEnv):
        def __init__(self) -> None:
            super().__init__(gym.spaces.Discrete(5), gym.spaces.Discrete(5), num_envs=2)

        def vector_reset(self, *, seeds=None, options=None):
            return [1, 1], [{}, {}]

        def vector_step(self, actions):
            return [a * 2 for a in actions], [1.0, 1.0], [False, True], [False, False], [{}, {}]

    base = convert_to_base_env(Doubling())
    base.poll()
    base.send_actions({0: {"agent0": 1}, 1: {"agent0": 2}})
    assert base.poll()[0] == {0: {"agent0": 2}, 1: {"agent0": 4}}
    with pytest.raises(NotImplementedError, match=r"Doubling must implement reset_at\(\)"):
        base.try_reset(1)
    assert base.get_sub_environments() == [] and base.try_render() is None


def test_a_multi_agent_env_is_polled_per_ready_agent_and_an_ended_episode_waits_for_its_reset() -> None:
    env_class = make_multi_agent(lambda config: Counter(length=2))
    base = convert_to_base_env(env_class({"num_agents": 2}), make_env=lambda i: env_class({"num_agents": 2}), num_envs=2)
    assert isinstance(base, MultiAgentEnvWrapper) and base.get_agent_ids() == {0, 1}
    obs, *_ = base.poll()
    assert set(obs) == {0, 1} and set(obs[0]) == {0, 1}
    base.send_actions({0: {0: 1, 1: 1}})
    obs, rewards, *_ = base.poll()
    assert set(obs) == {0} and rewards[0] == {0: 1.0, 1: 1.0}, "only the sub-environment that stepped is ready"
    base.send_actions({0: {0: 1, 1: 1}})
    assert base.poll()[2][0]["__all__"]
    with pytest.raises(ValueError, match=r"try_reset\(0\) before"):
        base.send_actions({0: {0: 1, 1: 1}})
    observations, _ = base.try_reset(0)
    assert observations is not None and set(observations[0]) == {0, 1}
    base.send_actions({0: {0: 1, 1: 1}})


def test_what_corral_s_runners_do_themselves_is_refused_with_what_to_use() -> None:
    with pytest.raises(ValueError, match=r"remote_worker_envs=True"):
        convert_to_base_env(Counter(), make_env=lambda i: Counter(), num_envs=2, remote_envs=True)
    with pytest.raises(ValueError, match=r"got int"):
        convert_to_base_env(3)
    base = convert_to_base_env(Counter())
    assert convert_to_base_env(base) is base
    assert with_dummy_agent_id({0: True}, "__all__") == {0: {"__all__": True}} and ASYNC_RESET_RETURN == "async_reset_return"

"""The memory test envs: StatelessCartPole hides CartPole's velocities, RepeatAfterMe rewards repeating an old bit."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.testing import RepeatAfterMe, StatelessCartPole


def test_stateless_cartpole_is_cartpole_without_the_velocities() -> None:
    env, full = StatelessCartPole(), gym.make("CartPole-v1")
    assert env.observation_space.shape == (2,) and env.action_space == full.action_space
    obs, _ = env.reset(seed=3)
    full_obs, _ = full.reset(seed=3)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    np.testing.assert_array_equal(obs, full_obs[[0, 2]])
    steps = 0
    while True:
        obs, reward, terminated, truncated, _ = env.step(steps % 2)
        full_obs, full_reward, full_terminated, full_truncated, _ = full.step(steps % 2)
        steps += 1
        np.testing.assert_array_equal(obs, full_obs[[0, 2]])
        assert (reward, terminated, truncated) == (full_reward, full_terminated, full_truncated) and reward == 1.0
        if terminated or truncated:
            break
    assert terminated and steps < 500, "alternating actions let the pole fall, as in CartPole"
    env.close()


def play(env: RepeatAfterMe, policy: str, seed: int = 0) -> tuple[list[int], list[float], list[bool]]:
    """One episode: ``"repeat"`` answers the bit ``repeat_delay`` steps back, ``"wrong"`` its opposite."""
    obs, _ = env.reset(seed=seed)
    seen, rewards, ends = [obs], [], []
    while True:
        back = len(seen) - 1 - env.repeat_delay
        right = seen[back] if back >= 0 else 0
        obs, reward, terminated, truncated, _ = env.step(right if policy == "repeat" else 1 - right)
        assert not truncated and env.observation_space.contains(obs)
        seen.append(obs)
        rewards.append(reward)
        ends.append(terminated)
        if terminated:
            return seen, rewards, ends


@pytest.mark.parametrize("delay", [0, 1, 3])
def test_repeat_after_me_rewards_the_bit_seen_repeat_delay_steps_ago(delay: int) -> None:
    env = RepeatAfterMe({"repeat_delay": delay, "episode_length": 20})
    seen, rewards, ends = play(env, "repeat")
    assert len(rewards) == 20 and ends == [False] * 19 + [True], "an episode ends after episode_length steps"
    assert rewards == [0.0] * delay + [1.0] * (20 - delay), "nothing to repeat in the first repeat_delay steps"
    assert set(seen) == {0, 1}, "the bits are random"
    _, wrong, _ = play(env, "wrong")
    assert wrong == [0.0] * delay + [-1.0] * (20 - delay)


def test_repeat_after_me_defaults_to_rllib_s_delay_and_is_seeded() -> None:
    env = RepeatAfterMe()
    assert (env.repeat_delay, env.episode_length) == (1, 100)
    assert env.observation_space == gym.spaces.Discrete(2) == env.action_space
    assert play(env, "repeat", seed=5)[0] == play(RepeatAfterMe(), "repeat", seed=5)[0]
    with pytest.raises(ValueError, match="repeat_delay >= 0"):
        RepeatAfterMe({"repeat_delay": -1})

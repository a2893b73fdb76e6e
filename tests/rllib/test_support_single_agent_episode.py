"""RLlib's ``SingleAgentEpisode``: built step by step, read by step with its lookback, sliced, cut and finalized."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

from corral.rllib.env.single_agent_episode import SingleAgentEpisode


def five_steps() -> SingleAgentEpisode:
    episode = SingleAgentEpisode()
    episode.add_env_reset(observation="obs_0", infos={"i": 0})
    for i in range(5):
        episode.add_env_step(observation=f"obs_{i + 1}", action=f"act_{i}", reward=float(i), extra_model_outputs={"logp": -i})
    return episode


def test_steps_are_read_from_the_chunk_s_start_and_negative_ones_from_the_end() -> None:
    episode = five_steps()
    assert len(episode) == 5 and episode.t == 5 and not episode.is_done
    assert episode.get_observations(0) == episode.observations[0] == "obs_0"
    assert episode.get_observations([1, 2]) == episode.get_observations(slice(1, 3)) == ["obs_1", "obs_2"]
    assert episode.get_rewards(-1) == episode.rewards[-1] == 4.0 and episode.get_actions(0) == "act_0"
    assert episode.get_extra_model_outputs("logp", slice(-2, None)) == [-3, -4]
    assert episode.get_infos(0) == {"i": 0} and episode.get_infos(1) == {} and episode.get_return() == 10.0
    with pytest.raises(IndexError, match=r"step 5 lies outside this episode's 5 steps .* pass fill"):
        episode.get_rewards(5)


def test_a_slice_is_a_chunk_of_its_own_and_cut_continues_the_episode() -> None:
    episode = five_steps()
    sliced = episode[3:4]
    assert (list(sliced.observations), list(sliced.actions), list(sliced.rewards)) == (["obs_3", "obs_4"], ["act_3"], [3.0])
    assert sliced.t_started == 3 and len(sliced) == 1
    kept = copy.deepcopy(episode)
    following = episode.cut()
    assert len(episode) == 5 and len(following) == 0 and following.t_started == 5 and following.id_ == episode.id_
    assert following.get_observations(-1) == "obs_5"
    with_history = kept.cut(len_lookback_buffer=2)
    assert with_history.get_rewards(slice(-2, 0), neg_index_as_lookback=True) == [3.0, 4.0] and len(with_history) == 0
    episode.add_env_step("obs_6", "act_5", 5.0, terminated=True)
    assert episode.is_done
    with pytest.raises(ValueError, match=r"has ended"):
        episode.add_env_step("obs_7", "act_6", 6.0)
    with pytest.raises(ValueError, match=r"no next chunk"):
        episode.cut()


def test_the_lookback_is_reached_by_negative_steps_and_fill_pads_beyond_it() -> None:
    empty = SingleAgentEpisode(observations=["o0", "o1", "o2", "o3"], actions=["a0", "a1", "a2"], rewards=[0.0, 1.0, 2.0])
    assert len(empty) == 0  # "auto": all data given is lookback
    with pytest.raises(IndexError):
        empty.get_rewards(0)
    assert empty.get_rewards(slice(-3, None)) == [0.0, 1.0, 2.0]
    assert empty.get_rewards(slice(-5, None), fill=0.0) == [0.0, 0.0, 0.0, 1.0, 2.0]
    episode = SingleAgentEpisode(
        observations=[f"o{i}" for i in range(-3, 4)],
        actions=[f"a{i}" for i in range(-3, 3)],
        rewards=[float(i) for i in range(-3, 3)],
        len_lookback_buffer=3,
    )
    assert len(episode) == 3
    windows = [episode.get_rewards(slice(t - 2, t + 1), neg_index_as_lookback=True) for t in range(3)]
    assert windows == [[-2.0, -1.0, 0.0], [-1.0, 0.0, 1.0], [0.0, 1.0, 2.0]]
    assert episode.get_rewards(slice(-4, 0), neg_index_as_lookback=True, fill=0.0) == [0.0, -3.0, -2.0, -1.0]
    with pytest.raises(ValueError, match=r"len_lookback_buffer=4 must lie between 0 and the 3 steps"):
        SingleAgentEpisode(observations=["o0", "o1", "o2", "o3"], actions=[1, 2, 3], rewards=[0, 0, 0], len_lookback_buffer=4)
    with pytest.raises(ValueError, match=r"one observation more than actions and rewards"):
        SingleAgentEpisode(observations=["o0"], actions=[1], rewards=[0.0])


def test_actions_of_a_structured_space_read_one_hot_and_padded_per_leaf_then_finalized_as_arrays() -> None:
    space = gym.spaces.Dict(
        {"a": gym.spaces.Discrete(3), "b": gym.spaces.MultiDiscrete([2, 3]), "c": gym.spaces.Box(-1.0, 1.0, (2,))}
    )
    episode = SingleAgentEpisode(action_space=space)
    episode.add_env_reset(observation=0)
    episode.add_env_step(1, {"a": 2, "b": np.array([1, 2]), "c": np.array([0.5, -0.5], np.float32)}, 1.0)
    last_two = episode.get_actions(slice(-1, 1), neg_index_as_lookback=True, fill=0.0, one_hot_discrete=True)
    padding, action = last_two
    assert padding["a"].tolist() == [0, 0, 0] and padding["b"].tolist() == [0] * 5 and padding["c"].tolist() == [0, 0]
    assert action["a"].tolist() == [0, 0, 1] and action["b"].tolist() == [0, 1, 0, 0, 1] and action["c"].tolist() == [0.5, -0.5]
    assert episode.finalize() is episode and episode.is_finalized
    batched = episode.get_actions(slice(None), one_hot_discrete=True)
    assert batched["a"].shape == (1, 3) and batched["c"].shape == (1, 2)
    assert isinstance(episode.get_rewards(slice(None)), np.ndarray)

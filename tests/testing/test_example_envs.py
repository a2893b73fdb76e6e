"""corral.testing.example_envs: RLlib's example envs (Ray 2.9), with RLlib's spaces, config keys, rewards and episode ends.

The expected spaces are written out as literals (read from RLlib 2.9's
``ray/rllib/examples/env``); each env's documented dynamics are played out;
single-agent envs pass gymnasium's ``check_env`` and multi-agent ones corral's
``MultiAgentEnvGuard``, which holds an env to corral's dict protocol.
"""

from __future__ import annotations

import copy
import math
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.spaces import Box, Dict, Discrete, MultiDiscrete, Tuple
from gymnasium.utils.env_checker import check_env, data_equivalence

import corral.testing.example_envs as E
from corral.core.environments.multi_agent_env import MultiAgentEnv
from corral.core.environments.multi_agent_guard import MultiAgentEnvGuard

THETA = 2 * 12 * 2 * math.pi / 360  # twice CartPole's angle threshold
CARTPOLE_OBS = Box(
    np.array([-4.8, -np.inf, -12 * 2 * math.pi / 360 * 2, -np.inf], np.float32),
    np.array([4.8, np.inf, 12 * 2 * math.pi / 360 * 2, np.inf], np.float32),
    dtype=np.float32,
)
WINDY_OBS = Tuple([Box(0.0, 100.0, (2,), np.float32), Discrete(4)])

# name: (factory, RLlib's observation space, RLlib's action space)
SINGLE_AGENT: dict[str, tuple[Callable[[], gym.Env[Any, Any]], gym.Space[Any], gym.Space[Any]]] = {
    "StatelessCartPole": (
        lambda: E.StatelessCartPole(),
        Box(np.array([-4.8, -THETA], np.float32), np.array([4.8, THETA], np.float32), dtype=np.float32),
        Discrete(2),
    ),
    "RepeatAfterMeEnv": (lambda: E.RepeatAfterMeEnv(), Discrete(2), Discrete(2)),
    "RepeatAfterMeEnv-continuous": (
        lambda: E.RepeatAfterMeEnv({"continuous": True}),
        Box(-1.0, 1.0, (2,), np.float32),
        Box(-1.0, 1.0, (2,), np.float32),
    ),
    "RepeatInitialObsEnv": (lambda: E.RepeatInitialObsEnv(), Discrete(2), Discrete(2)),
    "NestedSpaceRepeatAfterMeEnv": (
        lambda: E.NestedSpaceRepeatAfterMeEnv({}),
        Tuple([Discrete(2), Dict({"a": Box(-1.0, 1.0, (2,), np.float32)})]),
        Tuple([Discrete(2), Dict({"a": Box(-1.0, 1.0, (2,), np.float32)})]),
    ),
    "RandomEnv": (lambda: E.RandomEnv(), Discrete(2), Discrete(2)),
    "RandomLargeObsSpaceEnv": (lambda: E.RandomLargeObsSpaceEnv(), Box(-1.0, 1.0, (5000,), np.float32), Discrete(2)),
    "RandomLargeObsSpaceEnvContActions": (
        lambda: E.RandomLargeObsSpaceEnvContActions(),
        Box(-1.0, 1.0, (5000,), np.float32),
        Box(-1.0, 1.0, (5,), np.float32),
    ),
    "SimpleCorridor": (lambda: E.SimpleCorridor(), Box(0.0, 999.0, (1,), np.float32), Discrete(2)),
    "ParametricActionsCartPole": (
        lambda: E.ParametricActionsCartPole(10),
        Dict(
            {
                "action_mask": Box(0, 1, (10,), np.int8),
                "avail_actions": Box(-10.0, 10.0, (10, 2), np.float32),
                "cart": CARTPOLE_OBS,
            }
        ),
        Discrete(10),
    ),
    "ParametricActionsCartPoleNoEmbeddings": (
        lambda: E.ParametricActionsCartPoleNoEmbeddings(10),
        Dict({"valid_avail_actions_mask": Box(0.0, 1.0, (10,), np.float32), "cart": CARTPOLE_OBS}),
        Discrete(10),
    ),
    "WindyMazeEnv": (lambda: E.WindyMazeEnv({}), WINDY_OBS, Discrete(2)),
    "LookAndPush": (lambda: E.LookAndPush(), Discrete(5), Discrete(2)),
    "OneHot(LookAndPush)": (lambda: E.OneHot(E.LookAndPush()), Box(0.0, 1.0, (5,), np.float32), Discrete(2)),
    "MockEnv": (lambda: E.MockEnv(5), Discrete(1), Discrete(2)),
    "MockEnv2": (lambda: E.MockEnv2(5), Discrete(6), Discrete(2)),
    "MockEnv3": (lambda: E.MockEnv3(5), Discrete(100), Discrete(2)),
    "CorrelatedActionsEnv": (lambda: E.CorrelatedActionsEnv(None), Discrete(2), Tuple([Discrete(2), Discrete(2)])),
}

MASKED = {"ParametricActionsCartPole": "action_mask", "ParametricActionsCartPoleNoEmbeddings": "valid_avail_actions_mask"}


def legal_action(name: str, env: gym.Env[Any, Any], obs: Any, space: gym.Space[Any], rng: np.random.Generator) -> Any:
    """A random action: from the space, or among the valid ones of a masked env."""
    if name in MASKED:
        return int(rng.choice(np.flatnonzero(obs[MASKED[name]])))
    return space.sample()


def rollout(name: str, env: gym.Env[Any, Any], seed: int, max_steps: int = 60) -> list[Any]:
    """Up to ``max_steps`` steps from ``reset(seed)``, actions from a space seeded alike; each value is checked in its space."""
    space = copy.deepcopy(env.action_space)
    space.seed(seed)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    assert env.observation_space.contains(obs) and isinstance(info, dict)
    trace: list[Any] = [obs]
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(legal_action(name, env, obs, space, rng))
        assert env.observation_space.contains(obs), (name, obs)
        assert isinstance(reward, float) and math.isfinite(reward), (name, reward)
        assert isinstance(terminated, bool) and isinstance(truncated, bool) and isinstance(info, dict)
        trace.append((obs, reward, terminated, truncated))
        if terminated or truncated:
            break
    return trace


@pytest.mark.parametrize("name", list(SINGLE_AGENT))
def test_single_agent_spaces_are_rllibs_and_values_lie_in_them(name: str) -> None:
    make, observation_space, action_space = SINGLE_AGENT[name]
    env = make()
    assert env.observation_space == observation_space
    assert env.action_space == action_space
    rollout(name, env, seed=1)


@pytest.mark.parametrize("name", list(SINGLE_AGENT))
def test_the_same_seed_plays_the_same_episode(name: str) -> None:
    make = SINGLE_AGENT[name][0]
    first, second, third = (rollout(name, make(), seed) for seed in (7, 7, 8))
    assert data_equivalence(first, second, exact=True)
    if name not in {"MockEnv", "MockEnv2", "MockEnv3"}:  # these ignore actions and draw nothing
        assert not data_equivalence(first, third), "another seed, another episode"


INCOMPATIBLE_WITH_CHECK_ENV = {
    "ParametricActionsCartPole": "an action outside the mask raises, as RLlib's; check_env steps with unmasked random actions",
    "ParametricActionsCartPoleNoEmbeddings": "an action outside the mask raises, as RLlib's; check_env steps with random actions",
}
ALLOWED_WARNINGS = {"OneHot(LookAndPush)": "is different from the unwrapped version"}  # a wrapper, by definition


# the two left out are checked by their own tests (valid actions play CartPole, others raise)
@pytest.mark.parametrize("name", [name for name in SINGLE_AGENT if name not in INCOMPATIBLE_WITH_CHECK_ENV])
def test_gymnasium_check_env_passes_without_warnings(name: str) -> None:
    env = SINGLE_AGENT[name][0]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    unexpected = [str(w.message) for w in caught if ALLOWED_WARNINGS.get(name, "\0") not in str(w.message)]
    assert not unexpected, unexpected


# ---------------------------------------------------------------- memory envs


def test_stateless_cartpole_is_unwrapped_cartpole_without_velocities_or_time_limit() -> None:
    env, full = E.StatelessCartPole({"ignored": 1}), CartPoleEnv()
    assert isinstance(env, CartPoleEnv)
    obs, _ = env.reset(seed=3)
    full_obs, _ = full.reset(seed=3)
    assert obs.dtype == np.float32 and obs.shape == (2,)
    np.testing.assert_array_equal(obs, full_obs[[0, 2]])
    for t in range(600):  # a controller that reads the hidden state balances the pole past CartPole-v1's 500 steps
        x, x_dot, theta, theta_dot = env.state
        action = int(theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0)
        obs, reward, terminated, truncated, _ = env.step(action)
        full_obs, *_ = full.step(action)
        np.testing.assert_allclose(obs, full_obs[[0, 2]])
        assert reward == 1.0 and not terminated and not truncated, t
    obs, _ = env.reset(seed=3)
    while True:  # always pushing right lets the pole fall: terminated, as CartPole
        obs, reward, terminated, truncated, _ = env.step(1)
        if terminated:
            break
    assert not truncated and abs(obs[1]) > 12 * 2 * math.pi / 360


def play_repeat_after_me(env: E.RepeatAfterMeEnv, right: bool, seed: int = 0) -> tuple[list[float], bool, bool]:
    obs, _ = env.reset(seed=seed)
    seen = [0] * env.delay + [obs]
    rewards = []
    while True:
        target = seen[-(1 + env.delay)]
        obs, reward, terminated, truncated, _ = env.step(target if right else 1 - target)
        rewards.append(reward)
        seen.append(obs)
        if terminated or truncated:
            return rewards, terminated, truncated


@pytest.mark.parametrize(("delay", "episode_len", "steps"), [(1, 100, 100), (0, 100, 101), (3, 10, 8)])
def test_repeat_after_me_rewards_the_delayed_observation(delay: int, episode_len: int, steps: int) -> None:
    config = {"repeat_delay": delay, "episode_len": episode_len}
    rewards, terminated, truncated = play_repeat_after_me(E.RepeatAfterMeEnv(config), right=True)
    assert rewards == [1.0] * steps and terminated and truncated  # RLlib ends it after episode_len - delay + 1 steps
    rewards, *_ = play_repeat_after_me(E.RepeatAfterMeEnv(config), right=False)
    assert rewards == [-1.0] * steps


def test_repeat_after_me_continuous_loses_the_distance() -> None:
    env = E.RepeatAfterMeEnv({"continuous": True, "repeat_delay": 0, "episode_len": 5})
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and np.all((obs >= 0) & (obs < 1))
    _, reward, *_ = env.step(obs)
    assert reward == 0.0
    obs2, reward, *_ = env.step(np.zeros(2, np.float32))
    assert reward == pytest.approx(-float(np.abs(env.history[-2]).sum()))
    _, reward, *_ = env.step(obs2 + 0.25)
    assert reward == pytest.approx(-0.5)


def test_repeat_initial_obs_rewards_repeating_the_first_observation() -> None:
    env = E.RepeatInitialObsEnv(episode_len=7)
    first, _ = env.reset(seed=2)
    total, steps = 0.0, 0
    while True:
        obs, reward, terminated, truncated, _ = env.step(first)
        total, steps = total + reward, steps + 1
        assert obs == 0
        if terminated:
            break
    assert (total, steps, truncated) == (7.0, 7, True)
    env.reset(seed=2)
    assert env.step(1 - first)[1] == -1.0
    assert E.RepeatInitialObsEnv().episode_len == 100 and E.RepeatInitialObsEnv({"episode_len": 3}).episode_len == 3


def look_and_push(seed: int, last: int) -> tuple[int, float, list[int]]:
    env = E.LookAndPush()
    state, _ = env.reset(seed=seed)
    assert state == 2
    case, _, terminated, _, _ = env.step(0)  # look: the hidden case shows
    states = [case]
    total = -1.0
    for _ in range(3):  # push: to 2, 3, 4
        state, reward, terminated, _, _ = env.step(1)
        states.append(state)
        total += reward
        assert not terminated and reward == -1.0
    state, reward, terminated, truncated, _ = env.step(last)
    assert terminated and not truncated and state == 4
    return case, total + reward, states


def test_look_and_push_pays_the_final_push_only_in_case_one() -> None:
    outcomes = {look_and_push(seed, last)[0:2] for seed in range(8) for last in (0, 1)}
    assert outcomes == {(0, -14.0), (1, -14.0), (1, 6.0)}  # RLlib's rule: +10 only for push (1) in case 1
    assert look_and_push(0, 1)[2][1:] == [2, 3, 4]
    env = E.LookAndPush()
    env.reset(seed=0)
    assert env.step(1)[0] == 3 and env.step(0)[0] == 3  # looking away from state 2 stays put


def test_one_hot_encodes_the_inner_state() -> None:
    env = E.OneHot(E.LookAndPush())
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, np.eye(5, dtype=np.float32)[2])
    obs, *_ = env.step(1)
    np.testing.assert_array_equal(obs, np.eye(5, dtype=np.float32)[3])
    with pytest.raises(ValueError, match="Discrete"):
        E.OneHot(E.StatelessCartPole())


# ---------------------------------------------------------------- space envs


def test_nested_space_repeat_after_me_scores_leaf_by_leaf() -> None:
    env = E.NestedSpaceRepeatAfterMeEnv({"episode_len": 3})
    obs, _ = env.reset(seed=0)
    steps = 0
    while True:
        guess = (obs[0], {"a": obs[1]["a"] + np.float32(0.5)})
        obs, reward, terminated, truncated, _ = env.step(guess)
        steps += 1
        assert reward == pytest.approx(1.0 - 1.0)  # the Discrete leaf right (+1), the Box leaf 0.5 + 0.5 off
        if terminated:
            break
    assert steps == 3 and truncated
    custom = Dict({"x": Discrete(3), "y": Tuple([Discrete(2), Box(0.0, 1.0, (1,), np.float32)])})
    env = E.NestedSpaceRepeatAfterMeEnv({"space": custom})
    assert env.observation_space is custom and env.action_space is custom and env.episode_len == 100
    obs, _ = env.reset(seed=0)
    assert custom.contains(obs)
    assert env.step(copy.deepcopy(obs))[1] == 2.0


def test_parametric_actions_cartpole_plays_the_masked_moves() -> None:
    env = E.ParametricActionsCartPole(6)
    obs, _ = env.reset(seed=0)
    mask = obs["action_mask"]
    assert mask.dtype == np.int8 and mask.sum() == 2
    left, right = env.left_idx, env.right_idx
    np.testing.assert_array_equal(obs["avail_actions"][left], env.left_action_embed)
    np.testing.assert_array_equal(obs["avail_actions"][mask == 0], np.zeros((4, 2), np.float32))
    cart = CartPoleEnv()
    cart_obs, _ = cart.reset(seed=0)
    env.wrapped.unwrapped.state = cart.state = np.array(cart_obs, np.float64)  # the same start
    obs, reward, terminated, truncated, _ = env.step(right)
    np.testing.assert_allclose(obs["cart"], cart.step(1)[0])
    assert reward == 1.0 and not (terminated or truncated)
    invalid = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    with pytest.raises(ValueError, match="not one of the two valid actions"):
        env.step(invalid)
    seen = set()
    for step in range(20):
        obs, _, terminated, truncated, _ = env.step(env.left_idx if step % 2 else env.right_idx)
        seen.add(tuple(np.flatnonzero(obs["action_mask"])))
        if terminated or truncated:
            obs, _ = env.reset()
    assert len(seen) > 1, "the moves are hidden anew every step"


def test_parametric_actions_cartpole_no_embeddings_keeps_its_valid_actions() -> None:
    env = E.ParametricActionsCartPoleNoEmbeddings(6)
    obs, _ = env.reset(seed=4)
    mask = obs["valid_avail_actions_mask"].copy()
    assert mask.sum() == 2 and set(np.flatnonzero(mask)) == {env.left_idx, env.right_idx}
    for _ in range(5):
        obs, reward, *_ = env.step(env.right_idx)
        np.testing.assert_array_equal(obs["valid_avail_actions_mask"], mask)
        assert reward == 1.0
    with pytest.raises(ValueError):
        env.step(int(np.flatnonzero(mask == 0)[0]))


def test_correlated_actions_pays_five_for_each_agreement() -> None:
    env = E.CorrelatedActionsEnv({})
    obs, _ = env.reset(seed=0)
    total, steps = 0.0, 0
    while True:
        obs, reward, terminated, truncated, _ = env.step((obs, obs))
        total, steps = total + reward, steps + 1
        if terminated:
            break
    assert (steps, total, truncated) == (21, 210.0, True)
    obs, _ = env.reset(seed=0)
    assert env.step((obs, 1 - obs))[1] == 5.0  # the first part matches the observation
    obs = env.last_observation
    assert env.step((1 - obs, 1 - obs))[1] == 5.0  # the parts agree
    obs = env.last_observation
    assert env.step((1 - obs, obs))[1] == 0.0


# ---------------------------------------------------------------- random envs


def test_random_env_ends_by_its_length_limit_or_by_chance() -> None:
    env = E.RandomEnv({"p_terminated": 0.0, "max_episode_len": 7})
    env.reset(seed=0)
    ends = [env.step(0)[2:4] for _ in range(7)]
    assert ends == [(False, False)] * 6 + [(False, True)]
    env = E.RandomEnv({"p_done": 1.0})
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step(1)
    assert terminated and not truncated and -1.0 <= reward <= 1.0
    env = E.RandomEnv({"p_terminated": 0.5, "p_done": 0.0})
    env.reset(seed=1)
    assert any(env.step(0)[2] for _ in range(50)), "p_terminated wins over the older p_done"
    assert E.RandomEnv().p_terminated == 0.1 and E.RandomEnv().max_episode_len is None


def test_random_env_samples_its_configured_spaces() -> None:
    config = {
        "observation_space": Dict({"a": Box(-2.0, 2.0, (3,), np.float32), "b": Discrete(4)}),
        "action_space": Tuple([Discrete(2), Discrete(3)]),
        "reward_space": Box(5.0, 6.0, (), np.float32),
        "check_action_bounds": True,
    }
    env = E.RandomEnv(config)
    obs, _ = env.reset(seed=0)
    assert config["observation_space"].contains(obs)
    obs, reward, *_ = env.step((1, 2))
    assert config["observation_space"].contains(obs) and 5.0 <= reward <= 6.0
    with pytest.raises(ValueError, match="Illegal action"):
        env.step((1, 5))
    with pytest.raises(ValueError, match="Illegal action"):
        E.RandomEnv({"action_space": Tuple([Discrete(2), Discrete(3)])}).step((1,))


def test_random_env_static_samples_repeat() -> None:
    env = E.RandomEnv({"static_samples": True, "observation_space": Box(-1.0, 1.0, (3,), np.float32), "p_terminated": 0})
    first, _ = env.reset(seed=0)
    later = [env.step(0) for _ in range(3)]
    for obs, reward, *_ in later:
        np.testing.assert_array_equal(obs, first)
        assert obs is not first and reward == later[0][1]


def test_random_large_obs_space_envs_leave_the_callers_config_alone() -> None:
    config = {"p_terminated": 0.0}
    env = E.RandomLargeObsSpaceEnvContActions(config)
    assert config == {"p_terminated": 0.0} and env.p_terminated == 0.0
    obs, _ = env.reset(seed=0)
    assert obs.shape == (5000,) and obs.dtype == np.float32


# ---------------------------------------------------------------- mock envs


@pytest.mark.parametrize(
    ("make", "observations", "rewards", "infos"),
    [
        (lambda: E.MockEnv(3), [0, 0, 0, 0], [1.0] * 3, [{}] * 4),
        (lambda: E.MockEnv2(3), [0, 1, 2, 3], [100.0] * 3, [{}] * 4),
        (lambda: E.MockEnv3(3), [0, 1, 2, 3], [1.0, 2.0, 3.0], [{"timestep": t} for t in range(4)]),
    ],
)
def test_mock_envs_return_what_they_promise(make: Callable[[], gym.Env[Any, Any]], observations, rewards, infos) -> None:
    env = make()
    obs, info = env.reset(seed=5)
    got_obs, got_rewards, got_infos, ends = [obs], [], [info], []
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(1)
        got_obs.append(obs)
        got_rewards.append(reward)
        got_infos.append(info)
        ends.append((terminated, truncated))
    assert (got_obs, got_rewards, got_infos) == (observations, rewards, infos)
    assert ends == [(False, False), (False, False), (True, True)]


def test_mock_env2_remembers_its_seed_and_renders_an_image() -> None:
    env = E.MockEnv2(2)
    env.reset(seed=11)
    assert env.rng_seed == 11 and env.render_mode == "rgb_array"
    frame = env.render()
    assert frame.shape == (300, 400, 3) and frame.dtype == np.uint8
    assert E.MockEnv(4, config={"a": 1}).config == {"a": 1}


# ---------------------------------------------------------------- corridor and maze


@pytest.mark.parametrize("length", [10, 4])
def test_simple_corridor_pays_one_at_its_end(length: int) -> None:
    env = E.SimpleCorridor({} if length == 10 else {"corridor_length": length})
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, [0.0])
    assert env.step(0)[0][0] == 0.0, "the start is a wall"
    for step in range(1, length + 1):
        obs, reward, terminated, truncated, _ = env.step(1)
        assert obs[0] == step and obs.dtype == np.float32
        assert (reward, terminated, truncated) == ((1.0, True, True) if step == length else (0.0, False, False))
    env.reset()
    env.step(1)
    assert env.step(0)[0][0] == 0.0
    env.set_corridor_length(1)
    env.reset()
    assert env.step(1)[1:4] == (1.0, True, True)
    with pytest.raises(ValueError):
        env.step(2)


PATH = {(1, y): 1 for y in range(1, 7)} | {(x, 7): 2 for x in range(1, 6)} | {(6, y): 3 for y in range(2, 8)}
"""the wind direction (N 0, E 1, S 2, W 3) to move with at each cell of the way from S (1, 1) to F (6, 1)"""


def test_windy_maze_reaches_the_finish_by_moving_with_the_right_wind() -> None:
    env = E.WindyMazeEnv({})
    (pos, wind), _ = env.reset(seed=0)
    np.testing.assert_array_equal(pos, [1.0, 1.0])
    total, steps = 0.0, 0
    while True:
        cell = (int(pos[0]), int(pos[1]))
        (pos, wind), reward, terminated, truncated, _ = env.step(int(wind == PATH[cell]))
        total, steps = total + reward, steps + 1
        if terminated:
            break
    assert tuple(pos) == (6.0, 1.0) and total == 100.0 and not truncated and steps < 200
    env.reset(seed=0)
    for _ in range(199):
        assert env.step(0)[2:4] == (False, False)
    assert env.step(0)[1:4] == (0.0, True, True)  # as RLlib, truncation terminates too
    assert env._get_new_pos((1, 1), 0) == (1, 1) and env._get_new_pos((1, 1), 1) == (1, 2)  # walls block


# ---------------------------------------------------------------- multi-agent envs

MULTI_AGENT: dict[str, tuple[Callable[[], MultiAgentEnv], dict[Any, tuple[gym.Space[Any], gym.Space[Any]]]]] = {
    "BasicMultiAgent": (lambda: E.BasicMultiAgent(3), dict.fromkeys(range(3), (Discrete(2), Discrete(2)))),
    "EarlyDoneMultiAgent": (lambda: E.EarlyDoneMultiAgent(), dict.fromkeys(range(2), (Discrete(10), Discrete(2)))),
    "FlexAgentsMultiAgent": (lambda: E.FlexAgentsMultiAgent(), dict.fromkeys(range(5), (Discrete(2), Discrete(2)))),
    "GuessTheNumberGame": (lambda: E.GuessTheNumberGame({}), dict.fromkeys(range(2), (Discrete(2), MultiDiscrete([3, 3])))),
    "TwoStepGame": (lambda: E.TwoStepGame({}), dict.fromkeys(range(2), (Discrete(6), Discrete(2)))),
    "TwoStepGame-one-hot": (
        lambda: E.TwoStepGame({"one_hot_state_encoding": True}),
        dict.fromkeys(range(2), (MultiDiscrete([2, 2, 2, 3]), Discrete(2))),
    ),
    "TwoStepGame-state": (
        lambda: E.TwoStepGame({"one_hot_state_encoding": True, "separate_state_space": True}),
        dict.fromkeys(range(2), (Dict({"obs": MultiDiscrete([2, 2, 2, 3]), "state": MultiDiscrete([2, 2, 2])}), Discrete(2))),
    ),
    "RockPaperScissors": (lambda: E.RockPaperScissors({}), dict.fromkeys(["player1", "player2"], (Discrete(3), Discrete(3)))),
    "RockPaperScissors-sheldon": (
        lambda: E.RockPaperScissors({"sheldon_cooper_mode": True}),
        dict.fromkeys(["player1", "player2"], (Discrete(5), Discrete(5))),
    ),
    "HierarchicalWindyMazeEnv": (
        lambda: E.HierarchicalWindyMazeEnv({}),
        {"high_level_agent": (WINDY_OBS, Discrete(4)), "low_level_3": (Tuple([WINDY_OBS, Discrete(4)]), Discrete(2))},
    ),
    "MultiAgentCartPole": (lambda: E.MultiAgentCartPole({"num_agents": 2}), dict.fromkeys(range(2), (CARTPOLE_OBS, Discrete(2)))),
    "MultiAgentPendulum": (
        lambda: E.MultiAgentPendulum({"num_agents": 2}),
        dict.fromkeys(
            range(2),
            (
                Box(np.array([-1.0, -1.0, -8.0], np.float32), np.array([1.0, 1.0, 8.0], np.float32)),
                Box(-2.0, 2.0, (1,), np.float32),
            ),
        ),
    ),
    "MultiAgentMountainCar": (
        lambda: E.MultiAgentMountainCar({"num_agents": 2}),
        dict.fromkeys(
            range(2),
            (Box(np.array([-1.2, -0.07], np.float32), np.array([0.6, 0.07], np.float32)), Box(-1.0, 1.0, (1,), np.float32)),
        ),
    ),
    "MultiAgentStatelessCartPole": (
        lambda: E.MultiAgentStatelessCartPole({"num_agents": 3}),
        dict.fromkeys(range(3), (SINGLE_AGENT["StatelessCartPole"][1], Discrete(2))),
    ),
    "RandomMultiAgentEnv": (
        lambda: E.RandomMultiAgentEnv({"num_agents": 2}),
        dict.fromkeys(range(2), (Discrete(2), Discrete(2))),
    ),
}


def guarded_episode(env: MultiAgentEnv, seed: int, max_steps: int = 2000) -> list[Any]:
    """One episode through corral's protocol guard, random actions for the agents asked to act; the trace of it."""
    guard = MultiAgentEnvGuard(env, type(env).__name__)
    rng = np.random.default_rng(seed)
    obs, _ = guard.reset(seed=seed)
    trace: list[Any] = [obs]
    for _ in range(max_steps):
        actions = {}
        for agent in sorted(guard.acting, key=str):
            space = copy.deepcopy(env.get_action_space(agent))
            space.seed(int(rng.integers(2**31)))
            actions[agent] = space.sample()
        obs, rewards, terminateds, truncateds, _ = guard.step(actions)
        trace.append((obs, rewards, terminateds, truncateds))
        if terminateds["__all__"] or truncateds["__all__"]:
            return trace
    raise AssertionError(f"{type(env).__name__} did not end its episode in {max_steps} steps")


@pytest.mark.parametrize("name", list(MULTI_AGENT))
def test_multi_agent_envs_keep_corrals_protocol_with_rllibs_spaces(name: str) -> None:
    make, spaces = MULTI_AGENT[name]
    env = make()
    assert isinstance(env, MultiAgentEnv)
    for agent, (observation_space, action_space) in spaces.items():
        assert env.get_observation_space(agent) == observation_space, agent
        assert env.get_action_space(agent) == action_space, agent
    first = guarded_episode(env, seed=3)
    assert data_equivalence(first, guarded_episode(make(), seed=3)), "the same seed plays the same episode"


def test_basic_multi_agent_ends_when_every_agent_has_played_25_steps() -> None:
    env = E.BasicMultiAgent(2)
    obs, _ = env.reset(seed=0)
    assert obs == {0: 0, 1: 0} and env.agents == [0, 1]
    for step in range(1, 26):
        obs, rewards, terminateds, truncateds, _ = env.step({0: 0, 1: 1})
        assert rewards == {0: 1.0, 1: 1.0}
        assert terminateds == truncateds == {0: step == 25, 1: step == 25, "__all__": step == 25}
    assert env.agents == []
    assert env.render().shape == (200, 300, 3)


def test_early_done_multi_agent_alternates_and_ends_when_agent_0_finishes() -> None:
    env = E.EarlyDoneMultiAgent()
    obs, _ = env.reset(seed=0)
    assert obs == {0: 0}
    turns, results = [], []
    acting = 0
    while True:
        obs, rewards, terminateds, truncateds, _ = env.step({acting: 1})
        (acting,) = obs
        turns.append(acting)
        results.append((rewards[acting], terminateds[acting], terminateds["__all__"], truncateds["__all__"]))
        if terminateds["__all__"]:
            break
    assert turns == [1, 0, 1, 0, 1, 0]
    assert results[:5] == [(0.0, False, False, False)] + [(1.0, False, False, False)] * 4
    assert results[5] == (0.0, True, True, True), "agent 0's last step: reward 0, and the episode ends"


def test_flex_agents_come_and_go_with_ids_that_count_up() -> None:
    env = E.FlexAgentsMultiAgent()
    obs, _ = env.reset(seed=0)
    assert obs == {0: 0} and env.agents == [0]
    seen: set[int] = set()
    removed_early = 0
    for seed in range(3):
        lives: dict[int, int] = {}
        for step in guarded_episode(env, seed=seed)[1:]:
            obs, rewards, terminateds, _ = step
            for agent in obs:
                lives[agent] = lives.get(agent, 0) + 1
                assert rewards[agent] == 1.0
            seen |= set(obs)
            removed_early += sum(1 for a, done in terminateds.items() if done and a != "__all__" and lives.get(a, 0) < 25)
    assert len(seen) > 3 and removed_early, "agents joined, and some were removed before their 25 steps"
    assert sorted(seen) == list(range(min(seen), max(seen) + 1)) and env.agentID > max(seen), "ids count up, never reused"


def test_guess_the_number_rewards_questions_and_a_right_guess() -> None:
    env = E.GuessTheNumberGame({"max_number": 8, "max_steps": 5})
    assert env.action_space == MultiDiscrete([3, 8])
    assert env.reset(seed=0)[0] == {0: 0}
    obs, rewards, terminateds, truncateds, _ = env.step({0: np.array([0, 5])})
    assert obs == {1: 0} and rewards == {0: 0.0} and not terminateds["__all__"]
    assert env.step({1: np.array([0, 7])})[1] == {1: 1.0, 0: 1.0}  # "lower than 7?" yes; agent 0 earns the wasted step
    assert env.step({1: np.array([1, 7])})[1] == {1: 0.0, 0: 1.0}  # "higher than 7?" no
    assert env.step({1: np.array([2, 4])})[1:3] == ({1: 0.0, 0: -0.0}, {1: False, "__all__": False})
    _, rewards, terminateds, truncateds, _ = env.step({1: np.array([2, 5])})
    assert rewards == {1: 100.0, 0: -100.0} and terminateds["__all__"] and not truncateds["__all__"]
    env.reset()
    env.step({0: np.array([2, 3])})
    for _ in range(5):
        _, rewards, terminateds, truncateds, _ = env.step({1: np.array([0, 0])})
    assert truncateds["__all__"] and not terminateds["__all__"] and rewards[0] == 100.0
    env.reset()
    with pytest.raises(ValueError, match="No number"):
        env.step({1: np.array([2, 1])})


@pytest.mark.parametrize(
    ("first", "actions", "reward"),
    [(0, (0, 0), 7.0), (0, (1, 1), 7.0), (1, (0, 0), 0.0), (1, (1, 1), 8.0), (1, (0, 1), 1.0), (1, (1, 0), 1.0)],
)
def test_two_step_game_pays_its_matrix_split_between_the_agents(first: int, actions: tuple[int, int], reward: float) -> None:
    env = E.TwoStepGame({})
    obs, _ = env.reset(seed=0)
    assert obs == {0: 0, 1: 3}
    obs, rewards, terminateds, truncateds, infos = env.step({0: first, 1: 1 - first})
    assert obs == {0: 1 + first, 1: 4 + first} and rewards == {0: 0.0, 1: 0.0} and not terminateds["__all__"]
    obs, rewards, terminateds, truncateds, infos = env.step({0: actions[0], 1: actions[1]})
    assert rewards == {0: reward / 2, 1: reward / 2}
    assert terminateds == {"__all__": True} and truncateds == {"__all__": False} and infos[0] == {"done": True}


def test_two_step_game_encodings_and_logit_actions() -> None:
    env = E.TwoStepGame({"one_hot_state_encoding": True, "separate_state_space": True})
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs[0]["obs"], [1, 0, 0, 1])
    np.testing.assert_array_equal(obs[1]["obs"], [1, 0, 0, 2])
    np.testing.assert_array_equal(obs[1][E.ENV_STATE], [1, 0, 0])
    assert E.TwoStepGame({"separate_state_space": True}).observation_space == Discrete(6), "state only with one-hot"
    env = E.TwoStepGame({"actions_are_logits": True})
    env.reset(seed=0)
    env.step({0: np.array([0.0, 1.0]), 1: np.array([1.0, 0.0])})  # certain: agent 0 chooses 1
    assert env.step({0: np.array([0.0, 1.0]), 1: np.array([0.0, 1.0])})[1] == {0: 4.0, 1: 4.0}


def test_rock_paper_scissors_pays_the_winner_for_ten_moves() -> None:
    rps = E.RockPaperScissors
    assert rps.WIN_MATRIX[rps.ROCK, rps.SCISSORS] == (1, -1) and rps.WIN_MATRIX[rps.ROCK, rps.PAPER] == (-1, 1)
    assert rps.WIN_MATRIX[rps.SPOCK, rps.ROCK] == (1, -1) and rps.WIN_MATRIX[rps.LIZARD, rps.SPOCK] == (1, -1)
    assert rps.WIN_MATRIX[rps.PAPER, rps.LIZARD] == (-1, 1) and rps.WIN_MATRIX[rps.SCISSORS, rps.LIZARD] == (1, -1)
    for (move1, move2), (r1, r2) in rps.WIN_MATRIX.items():
        assert rps.WIN_MATRIX[move2, move1] == (r2, r1) and r1 + r2 == 0 and (r1 == 0) == (move1 == move2)
    assert sum(r1 for r1, _ in rps.WIN_MATRIX.values()) == 0 and len(rps.WIN_MATRIX) == 25
    env = rps({})
    assert env.reset(seed=0)[0] == {"player1": 0, "player2": 0}
    for move in range(1, 11):
        obs, rewards, terminateds, truncateds, _ = env.step({"player1": rps.PAPER, "player2": rps.ROCK})
        assert obs == {"player1": rps.ROCK, "player2": rps.PAPER} and rewards == {"player1": 1.0, "player2": -1.0}
        assert terminateds == {"__all__": move == 10} and truncateds == {"__all__": False}
    env.reset()
    with pytest.raises(ValueError, match="outside"):
        env.step({"player1": rps.LIZARD, "player2": rps.ROCK})
    env = rps({"sheldon_cooper_mode": True})
    env.reset()
    assert env.step({"player1": rps.LIZARD, "player2": rps.SPOCK})[1] == {"player1": 1.0, "player2": -1.0}


def test_hierarchical_windy_maze_pays_low_level_agents_for_moving_toward_their_goal() -> None:
    env = E.HierarchicalWindyMazeEnv({})
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["high_level_agent"]
    moves = {0: 0, -1: 0, 1: 0}
    for level in range(1, 3):
        obs, rewards, terminateds, _, _ = env.step({"high_level_agent": 1})  # goal: east
        low = f"low_level_{level}"
        assert list(obs) == [low] and obs[low][1] == 1 and rewards == {low: 0.0} and not terminateds["__all__"]
        for step in range(25):
            before = env.flat_env.pos
            wind = obs[low][0][1]
            obs, rewards, terminateds, _, _ = env.step({low: int(step % 3 != 0)})  # mostly move, whatever the wind
            moved = env.flat_env.pos != before
            expected = 0.0 if not moved else (1.0 if wind == 1 else -1.0)
            assert rewards[low] == expected
            moves[int(expected)] += 1
        assert terminateds == {"__all__": False, low: True} and set(obs) == {low, "high_level_agent"}
        assert rewards["high_level_agent"] == 0.0
    assert moves[0] and moves[1], "both staying and moving toward the goal happened"


def test_make_multi_agent_envs_copy_one_env_per_agent_and_pickle_by_name() -> None:
    env = E.MultiAgentStatelessCartPole({"num_agents": 3})
    obs, _ = env.reset(seed=0)
    assert sorted(obs) == [0, 1, 2] and all(o.shape == (2,) for o in obs.values())
    assert all(isinstance(sub, E.StatelessCartPole) for sub in env.envs)
    random_env = E.RandomMultiAgentEnv({"num_agents": 2, "observation_space": Box(0.0, 1.0, (4,), np.float32)})
    assert random_env.get_observation_space(1) == Box(0.0, 1.0, (4,), np.float32)
    for cls in (E.MultiAgentCartPole, E.MultiAgentPendulum, E.MultiAgentMountainCar, E.MultiAgentStatelessCartPole):
        assert pickle.loads(pickle.dumps(cls)) is cls
    assert E.MultiAgentCartPole.__name__ == "MultiAgentCartPole" and E.RandomMultiAgentEnv.__name__ == "RandomMultiAgentEnv"


# ---------------------------------------------------------------- matrix-game mixins


def test_info_mixins_count_joint_actions() -> None:
    class TwoByTwo(E.TwoPlayersTwoActionsInfoMixin):
        pass

    game = TwoByTwo()
    game._init_info()
    for actions in [(0, 0), (0, 1), (1, 1), (0, 0)]:
        game._accumulate_info(*actions)
    assert game._get_episode_info() == {"CC": 0.5, "DD": 0.25, "CD": 0.25, "DC": 0.0}
    game._reset_info()
    assert game.cc_count == []

    class NByN(E.NPlayersNDiscreteActionsInfoMixin):
        pass

    game_n = NByN()
    game_n._init_info()
    assert game_n._get_episode_info() == {}
    for actions in [(0, 2, 1), (0, 2, 1), (1, 1, 1), (0, 2, 1)]:
        game_n._accumulate_info(*actions)
    assert game_n._get_episode_info() == {"0_2_1": 0.75, "1_1_1": 0.25}
    with pytest.raises(TypeError):
        E.InfoAccumulationInterface()  # type: ignore[abstract]

"""RLlib's environment options: reward clipping as RLlib reads it, env class paths and constructors of any shape."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral import ConfigError
from corral.errors import EnvError


def sampled_rewards(make_algo: Any, clip_rewards: Any) -> np.ndarray:
    config = corral.get_config("PPO").environment("Pendulum-v1", clip_rewards=clip_rewards).debugging(seed=0)
    config.update_from_dict({"num_envs_per_env_runner": 2, "train_batch_size": 200, "minibatch_size": 100})
    return make_algo(config).sample().policy_batches["default_policy"]["rewards"]


def test_clip_rewards_true_takes_each_reward_s_sign(make_algo) -> None:
    rewards = sampled_rewards(make_algo, True)
    assert set(np.unique(rewards)) <= {-1.0, 0.0} and (rewards == -1.0).any()


def test_clip_rewards_false_and_none_keep_the_rewards_a_number_clips_them(make_algo) -> None:
    for kept in (False, None):
        assert sampled_rewards(make_algo, kept).min() < -1.0  # Pendulum's rewards reach -16
    clipped = sampled_rewards(make_algo, 0.5)
    assert clipped.min() == -0.5 and clipped.max() <= 0.0


@pytest.mark.parametrize("bad", [0, -1.0, "sign", float("inf")])
def test_a_clip_rewards_that_means_nothing_is_refused_with_what_it_takes(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"clip_rewards takes True .*a number x > 0"):
        corral.get_config("PPO").environment(clip_rewards=bad)


def build_env(make_algo: Any, env: Any, env_config: dict[str, Any] | None = None) -> gym.Env:
    config = corral.get_config("PPO").environment(env, env_config=env_config or {}).env_runners(num_envs_per_env_runner=1)
    return make_algo(config.training(train_batch_size=64, minibatch_size=32)).env_runner_group.local_env_runner.base_env.envs[0]


def test_a_dotted_class_path_names_an_env_as_a_colon_path_does(make_algo) -> None:
    from corral.testing.envs import CountingEnv

    assert isinstance(build_env(make_algo, "corral.testing.envs.CountingEnv").unwrapped, CountingEnv)


def test_a_dotted_path_that_does_not_import_says_why() -> None:
    with pytest.raises(EnvError, match=r"unknown environment 'corral.testing.envs.Nothing'.*has no attribute 'Nothing'"):
        corral.get_config("PPO").environment("corral.testing.envs.Nothing").build()


class NoConstructor(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(2, np.float32), 1.0, True, False, {}


class KeywordOptions(NoConstructor):
    def __init__(self, render_mode: str | None = None, size: int = 5) -> None:
        self.render_mode, self.size = render_mode, size


class TakesTheContext(NoConstructor):
    def __init__(self, config: Any = None) -> None:
        self.config = config


def test_an_env_class_without_a_constructor_is_built_without_arguments(make_algo) -> None:
    assert isinstance(build_env(make_algo, NoConstructor).unwrapped, NoConstructor)


def test_an_env_class_with_keyword_options_gets_env_config_as_keywords(make_algo) -> None:
    env = build_env(make_algo, KeywordOptions, {"size": 9}).unwrapped
    assert isinstance(env, KeywordOptions) and env.size == 9 and env.render_mode is None


def test_an_env_class_taking_a_config_gets_the_env_context_as_rllib_passes_it(make_algo) -> None:
    env = build_env(make_algo, TakesTheContext, {"size": 9}).unwrapped
    assert env.config["size"] == 9 and env.config.worker_index == 0


def test_env_config_keys_a_keyword_class_does_not_take_are_named() -> None:
    with pytest.raises(EnvError, match=r"takes the keyword arguments render_mode, size, but env_config has 'colour'"):
        corral.get_config("PPO").environment(KeywordOptions, env_config={"colour": 1}).build()


class Corridor(corral.TaskSettableEnv):
    """Walk to the end of a corridor whose length is the task; episodes are as long as the corridor."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: Any = None) -> None:
        self.length, self.position = 2, 0

    def get_task(self) -> int:
        return self.length

    def set_task(self, task: int) -> None:
        self.length = task

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.position = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.position += 1
        return np.array([float(self.position)], np.float32), 1.0, self.position >= self.length, False, {}


def longer_corridor(result: dict[str, Any], env: Corridor, context: Any) -> int:
    """One step longer after every iteration, and the sub-environment's index added, to see each gets its own."""
    return env.get_task() + 1 + 10 * context.vector_index


def test_env_task_fn_sets_each_sub_environment_s_task_after_every_iteration(make_algo) -> None:
    config = corral.get_config("PPO").environment(Corridor, env_task_fn=longer_corridor).debugging(seed=0)
    algo = make_algo(config.update_from_dict({"num_envs_per_env_runner": 2, "train_batch_size": 64, "minibatch_size": 32}))
    worker = algo.workers.local_worker()
    algo.train()
    assert worker.foreach_env(lambda env: env.unwrapped.get_task()) == [3, 13]
    algo.train()
    assert worker.foreach_env(lambda env: env.unwrapped.get_task()) == [4, 24]
    assert algo.train()["episode_reward_max"] == 24  # the next samples come from the tasks set (reward 1 a step)


def test_env_task_fn_on_an_env_without_set_task_is_refused_before_training() -> None:
    config = corral.get_config("PPO").environment("CartPole-v1", env_task_fn=longer_corridor)
    with pytest.raises(ConfigError, match=r"env_task_fn sets tasks with set_task\(task\).*corral\.TaskSettableEnv"):
        config.env_runners(vectorize_mode="sync").build()


class OldApiCorridor(gym.Env):
    """A gymnasium env written to the pre-0.26 API: reset() without a seed, four-value step, seed() apart."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: Any = None, max_steps: int = 50) -> None:
        self.position, self.steps, self.max_steps, self.seeded = 0, 0, max_steps, None

    def seed(self, seed: int | None = None) -> list[int | None]:
        self.seeded = seed
        return [seed]

    def reset(self) -> np.ndarray:  # type: ignore[override]
        self.position = self.steps = 0
        return np.zeros(1, np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, dict[str, Any]]:  # type: ignore[override]
        self.position, self.steps = self.position + int(action), self.steps + 1
        cut = self.position < 5 and self.steps >= self.max_steps  # as gym's TimeLimit flagged it
        return np.full(1, self.position, np.float32), float(action), self.position >= 5 or cut, {"TimeLimit.truncated": cut}


def old_space(kind: str, **attributes: Any) -> Any:
    """An object of a class named like a ``gym.spaces`` one, with its attributes (the ``gym`` package is not installed)."""
    space = type(kind, (), {})()
    space.__dict__.update(attributes)
    return space


class OldGymPackageEnv:
    """An env of the old ``gym`` package, duck-typed: no gymnasium base class, gym's own space classes."""

    def __init__(self, config: Any = None) -> None:
        self.observation_space = old_space(
            "Box", low=np.zeros(2, np.float32), high=np.ones(2, np.float32), shape=(2,), dtype=np.dtype(np.float32)
        )
        self.action_space = old_space("Discrete", n=3)
        self.t = 0

    def reset(self) -> np.ndarray:
        self.t = 0
        return np.zeros(2, np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        self.t += 1
        return np.full(2, 0.1 * self.t, np.float32), 1.0, self.t >= 4, {}


@pytest.mark.parametrize("env", [OldApiCorridor, OldGymPackageEnv], ids=["old-api-gymnasium-class", "gym-package-env"])
def test_old_gym_envs_are_wrapped_to_gymnasium_s_api_and_train(make_algo, env) -> None:
    config = corral.get_config("PPO").environment(env).training(train_batch_size=64, minibatch_size=32, num_epochs=1)
    algo = make_algo(config.debugging(seed=3))
    result = algo.train()
    assert result["episodes_this_iter"] > 0
    runner = algo.env_runner_group.local_env_runner
    assert isinstance(runner.base_env.single_action_space, gym.spaces.Discrete)  # what corral steps speaks gymnasium
    assert isinstance(runner.base_env.single_observation_space, gym.spaces.Box)
    assert set(runner.foreach_env(type)) == {env}  # foreach_env reaches the user's env itself, not corral's adapter


def test_an_old_api_env_is_seeded_through_its_seed_method_and_truncation_is_read_from_info() -> None:
    from corral.integrations.old_gym import OldGymEnv

    wrapped = OldGymEnv(OldApiCorridor(max_steps=1))
    obs, info = wrapped.reset(seed=7)
    assert wrapped.env.seeded == 7 and info == {} and obs.shape == (1,)
    _, reward, terminated, truncated, _ = wrapped.step(0)
    assert (reward, terminated, truncated) == (0.0, False, True)
    _, _, terminated, truncated, _ = OldGymEnv(OldApiCorridor()).step(1)
    assert (terminated, truncated) == (False, False)


def test_without_auto_wrap_an_old_gym_env_is_refused_naming_the_fix(make_algo) -> None:
    config = corral.get_config("PPO").environment(OldApiCorridor, auto_wrap_old_gym_envs=False)
    with pytest.raises(EnvError, match=r"old gym API .*auto_wrap_old_gym_envs=True"):
        make_algo(config)


def test_an_old_space_gymnasium_has_no_counterpart_of_is_named() -> None:
    from corral.integrations.old_gym import gymnasium_space

    with pytest.raises(EnvError, match=r"observation_space is a .*Graph, which corral cannot turn into a gymnasium space"):
        gymnasium_space(old_space("Graph"), "observation_space")


def test_an_atari_game_gets_deepmind_s_preprocessing_and_sign_clipped_rewards(make_algo) -> None:
    config = corral.get_config("PPO").environment("ALE/Pong-v5").debugging(seed=0)
    config.training(train_batch_size=256, minibatch_size=128, num_epochs=1).env_runners(num_envs_per_env_runner=2)
    algo = make_algo(config)
    assert algo.get_policy().observation_space == gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    batch = algo.sample().policy_batches["default_policy"]
    assert batch["obs"].dtype == np.uint8 and batch["obs"].shape[1:] == (84, 84, 4)
    assert set(np.unique(batch["rewards"])) <= {-1.0, 0.0, 1.0} and (batch["rewards"] == -1.0).any()  # Pong scores
    assert algo.train()["num_env_steps_sampled"] >= 512


def test_is_atari_false_keeps_the_game_s_own_frames_and_is_atari_true_needs_a_game(make_algo) -> None:
    config = corral.get_config("PPO").environment("ALE/Pong-v5", is_atari=False).env_runners(num_envs_per_env_runner=1)
    assert make_algo(config.training(train_batch_size=64, minibatch_size=32)).get_policy().observation_space.shape == (
        210,
        160,
        3,
    )
    with pytest.raises(ConfigError, match="is_atari=True wraps ale-py games"):
        make_algo(corral.get_config("PPO").environment("CartPole-v1", is_atari=True))


def test_an_atari_game_without_the_atari_extra_names_it(make_algo, hide_package) -> None:
    hide_package("cv2")
    with pytest.raises(EnvError, match=r"OpenCV: pip install 'corral\[atari\]'"):
        make_algo(corral.get_config("PPO").environment("ALE/Breakout-v5"))


class DoublePrecisionEnv(gym.Env):
    """Declares float32 observations and returns float64 ones: gymnasium's checker warns about it."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(2, np.float64), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(2, np.float64), 1.0, True, False, {}


@pytest.mark.parametrize("disabled", [False, True])
def test_gymnasium_s_env_checker_looks_at_each_env_unless_disable_env_checking(make_algo, disabled) -> None:
    import warnings

    config = corral.get_config("PPO").environment(DoublePrecisionEnv, disable_env_checking=disabled)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_algo(config.training(train_batch_size=64, minibatch_size=32, num_epochs=1)).train()
    messages = [str(warning.message) for warning in caught]
    assert any("expecting numpy array dtype to be float32, actual type: float64" in m for m in messages) != disabled


def test_a_runner_s_env_is_rllib_s_worker_env_one_sub_environment_as_its_creator_made_it(make_algo) -> None:
    """RLlib scripts step ``workers.local_worker().env`` by hand; corral steps the whole ``base_env``."""
    from corral.testing.envs import CountingEnv

    config = corral.get_config("PPO").environment("CartPole-v1").env_runners(num_envs_per_env_runner=4)
    algo = make_algo(config.training(train_batch_size=64, minibatch_size=32))
    runner = algo.workers.local_worker()
    assert runner.base_env.num_envs == 4
    assert runner.env.spec.max_episode_steps == 500, "gym.make's env, its time limit kept"
    obs, _ = runner.env.reset(seed=0)
    assert obs.shape == (4,) and algo.compute_single_action(obs) in (0, 1)

    custom = make_algo(config.environment(CountingEnv)).workers.local_worker()
    assert type(custom.env) is CountingEnv and custom.env is custom.sub_environments[0], "the user's object itself"

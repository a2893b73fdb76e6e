"""RLlib's remote_worker_envs: each sub-environment a Ray actor (started here, on two CPUs), stepped in parallel."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import ray

from corral import ConfigError, DefaultCallbacks, get_config
from corral.core.environments.remote_sub_environments import RemoteVectorEnv

pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")


class TaskCorridor(gym.Env):
    """RLlib's example shape: a TaskSettableEnv whose task a callback sets through the actor's own method."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: Any) -> None:
        self.task = int(config.get("task", 1))
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.full(1, self.t, np.float32), float(action), self.t >= 5, False, {"task": self.task}

    def set_task(self, task: int) -> None:
        self.task = task

    def get_task(self) -> int:
        return self.task


class SeenSubEnvironments(DefaultCallbacks):
    seen: list[tuple[Any, int]] = []  # noqa: RUF012 - the test reads what the hook saw

    def on_sub_environment_created(self, *, worker: Any, sub_environment: Any, env_context: Any, **kwargs: Any) -> None:
        SeenSubEnvironments.seen.append((sub_environment, env_context.vector_index))


def ppo(env: Any, **options: Any) -> Any:
    settings = {"train_batch_size": 60, "minibatch_size": 30, "num_epochs": 1, "num_envs_per_env_runner": 3, "seed": 0}
    return get_config("PPO").environment(env).update_from_dict({**settings, **options})


def test_an_env_class_becomes_the_actor_and_a_callback_reaches_its_methods() -> None:
    SeenSubEnvironments.seen.clear()
    config = ppo(TaskCorridor, remote_worker_envs=True, env_config={"task": 3}).callbacks(SeenSubEnvironments)
    algo = config.build()
    try:
        runner = algo.workers.local_worker()
        assert isinstance(runner.base_env, RemoteVectorEnv) and len(runner.sub_environments) == 3
        assert [index for _, index in SeenSubEnvironments.seen] == [0, 1, 2], "the hook gets each actor"
        assert [actor for actor, _ in SeenSubEnvironments.seen] == runner.sub_environments
        assert runner.env is runner.sub_environments[0]
        result = algo.train()
        assert result["episodes_this_iter"] >= 9 and result["episode_len_mean"] == 5.0
        assert ray.get([env.get_task.remote() for env in runner.sub_environments]) == [3, 3, 3]
        [refs] = algo.workers.foreach_env(lambda env: env.set_task.remote(7))  # RLlib's remote_base_env example
        ray.get(refs)
        assert ray.get([env.get_task.remote() for env in runner.sub_environments]) == [7, 7, 7]
    finally:
        algo.stop()


def test_remote_sub_environments_sample_what_the_same_envs_in_a_loop_sample() -> None:
    """Seeded as SyncVectorEnv seeds its copies, the actors' episodes are the loop's, step for step."""
    batches = []
    for remote in (True, False):
        algo = ppo("CartPole-v1", remote_worker_envs=remote, vectorize_mode="sync").build()
        try:
            batches.append(algo.sample().policy_batches["default_policy"])
        finally:
            algo.stop()
    remote_batch, loop_batch = batches
    np.testing.assert_array_equal(remote_batch["obs"], loop_batch["obs"])
    np.testing.assert_array_equal(remote_batch["actions"], loop_batch["actions"])
    np.testing.assert_array_equal(remote_batch["terminateds"], loop_batch["terminateds"])


def test_remote_sub_environments_on_a_remote_env_runner_train() -> None:
    algo = ppo("CartPole-v1", remote_worker_envs=True, num_env_runners=1).build()
    try:
        result = algo.train()
        assert result["num_env_steps_sampled"] >= 60 and result["num_healthy_env_runners"] == 1
        kinds = algo.workers.foreach_env_runner(lambda r: type(r.base_env).__name__, local_env_runner=False)
        assert kinds == ["RemoteVectorEnv"]
    finally:
        algo.stop()


@pytest.mark.parametrize(
    ("options", "named"),
    [({"horizon": 10}, "horizon"), ({"restart_failed_sub_environments": True}, "restart_failed_sub_environments")],
)
def test_what_needs_the_sub_environments_inside_the_runner_is_refused(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=rf"remote_worker_envs=True steps each sub-environment as it is.*{named}"):
        ppo("CartPole-v1", remote_worker_envs=True, **options).validate()


def test_a_multi_agent_env_s_sub_environments_stay_in_the_runner() -> None:
    from corral.testing.example_envs.multi_agent import MultiAgentCartPole

    config = ppo(MultiAgentCartPole, remote_worker_envs=True, env_config={"num_agents": 2})
    with pytest.raises(ConfigError, match=r"remote_worker_envs makes actors of single-agent envs"):
        config.build()

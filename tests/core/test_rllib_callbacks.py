"""Callback classes written exactly as RLlib's docs write them build, run, and get each argument RLlib documents."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest

from corral import ConfigError, DefaultCallbacks, MultiAgentBatch, SampleBatch, get_config
from corral.core.sampling.env_runner import Episode
from corral.core.sampling.multi_agent_env_runner import MultiAgentEpisode

NUM_ENVS = 3


def ppo(callbacks: Any, env: str = "CartPole-v1", **overrides: Any) -> Any:
    values = {"num_envs_per_env_runner": NUM_ENVS, "vectorize_mode": "sync", "train_batch_size": 192, "minibatch_size": 64}
    return (
        get_config("PPO")
        .environment(env)
        .update_from_dict({**values, "num_epochs": 1, "seed": 0, **overrides})
        .training(model={"fcnet_hiddens": [16]})
        .callbacks(callbacks)
    )


def the(algo: Any, cls: type) -> Any:
    (found,) = [callbacks for callbacks in algo.callbacks.callbacks if type(callbacks) is cls]
    return found


class FromRLlibDocs(DefaultCallbacks):
    """Every hook with the signature of RLlib's DefaultCallbacks (its older API stack), recording what it is given."""

    def __init__(self) -> None:
        self.created: list[tuple[Any, ...]] = []
        self.sub_environments: list[tuple[Any, ...]] = []
        self.episodes: list[tuple[Any, ...]] = []
        self.trajectories: list[tuple[Any, ...]] = []
        self.samples: list[tuple[Any, ...]] = []
        self.learned: list[tuple[Any, ...]] = []
        self.results: list[tuple[Any, ...]] = []
        self.algorithm: Any = None

    def on_algorithm_init(self, *, algorithm, **kwargs):
        self.algorithm = algorithm

    def on_create_policy(self, *, policy_id, policy):
        self.created.append((policy_id, policy))

    def on_sub_environment_created(self, *, worker, sub_environment, env_context, env_index=None, **kwargs):
        self.sub_environments.append((worker, sub_environment, env_context, env_index))

    def on_episode_start(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        self.episodes.append(("start", worker, base_env, policies, episode, env_index))

    def on_episode_step(self, *, worker, base_env, policies=None, episode, env_index=None, **kwargs):
        self.episodes.append(("step", worker, base_env, policies, episode, env_index))

    def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        self.episodes.append(("end", worker, base_env, policies, episode, env_index))

    def on_postprocess_trajectory(
        self, *, worker, episode, agent_id, policy_id, policies, postprocessed_batch, original_batches, **kwargs
    ):
        # RLlib's custom-metrics example, as its docs write it
        if "num_batches" not in episode.custom_metrics:
            episode.custom_metrics["num_batches"] = 0
        episode.custom_metrics["num_batches"] += 1
        self.trajectories.append((worker, episode, agent_id, policy_id, policies, postprocessed_batch, original_batches))

    def on_sample_end(self, *, worker, samples, **kwargs):
        self.samples.append((worker, samples))

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        self.learned.append((policy, train_batch))

    def on_train_result(self, *, algorithm, result, **kwargs):
        self.results.append((algorithm, result))

    def on_evaluate_start(self, *, algorithm, **kwargs):
        pass

    def on_evaluate_end(self, *, algorithm, evaluation_metrics, **kwargs):
        pass

    def on_checkpoint_loaded(self, *, algorithm, **kwargs):
        pass

    def on_workers_recreated(self, *, algorithm, worker_set, worker_ids, is_evaluation, **kwargs):
        pass


def test_a_callback_class_from_rllib_s_docs_builds_runs_and_gets_each_documented_argument(make_algo) -> None:
    algo = make_algo(ppo(FromRLlibDocs))
    first, result = algo.train(), algo.train()
    seen = the(algo, FromRLlibDocs)
    runner = algo.env_runner_group.local_env_runner
    policy = algo.get_policy()

    assert seen.algorithm is algo
    assert seen.created == [("default_policy", policy)]
    # each sub-environment, as the user made it (gymnasium's own env: no wrapper in the way)
    assert [(w, context.vector_index, index) for w, _, context, index in seen.sub_environments] == [
        (runner, i, i) for i in range(NUM_ENVS)
    ]
    assert [sub for _, sub, _, _ in seen.sub_environments] == runner.sub_environments
    assert {type(sub).__name__ for _, sub, _, _ in seen.sub_environments} == {"CartPoleEnv"}

    assert {kind for kind, *_ in seen.episodes} == {"start", "step", "end"}
    for _, worker, base_env, policies, episode, env_index in seen.episodes:
        assert worker is runner and base_env is runner.base_env and policies is runner.policies
        assert isinstance(episode, Episode) and episode.env_index == env_index and 0 <= env_index < NUM_ENVS

    # one trajectory per sub-environment and sample call, each before and after postprocessing
    assert len(seen.trajectories) == NUM_ENVS * len(seen.samples)
    for worker, episode, agent_id, policy_id, policies, post, originals in seen.trajectories:
        assert worker is runner and agent_id is None and policy_id == "default_policy" and policies is runner.policies
        assert isinstance(episode, Episode)
        assert set(originals) == {None}
        original_policy_id, original_policy, original = originals[None]
        assert original_policy_id == "default_policy" and original_policy is policy
        assert SampleBatch.ADVANTAGES in post and SampleBatch.ADVANTAGES not in original
        assert original.count == post.count > 0
        assert np.array_equal(original[SampleBatch.OBS], post[SampleBatch.OBS])
        assert np.array_equal(original[SampleBatch.REWARDS], post[SampleBatch.REWARDS])
    calls = range(0, len(seen.trajectories), NUM_ENVS)
    envs_per_call = [{episode.env_index for _, episode, *_ in seen.trajectories[k : k + NUM_ENVS]} for k in calls]
    assert envs_per_call == [set(range(NUM_ENVS))] * len(seen.samples)
    # an episode running when its trajectory was postprocessed carries the metric into the results when it ends
    assert result["custom_metrics"]["num_batches_max"] >= 1

    assert all(worker is runner and isinstance(samples, MultiAgentBatch) for worker, samples in seen.samples)
    trained = [first["num_env_steps_trained"], result["num_env_steps_trained"] - first["num_env_steps_trained"]]
    assert [(p, batch.count) for p, batch in seen.learned] == [(policy, n) for n in trained]
    assert seen.results == [(algo, first), (algo, result)]


class FromRLlibNewStackDocs(DefaultCallbacks):
    """The hooks as RLlib's newer API stack documents them: ``env``, ``rl_module`` and ``metrics_logger`` by keyword."""

    seen: ClassVar[list[tuple[Any, ...]]] = []

    def on_environment_created(self, *, env_runner, metrics_logger=None, env, env_context, **kwargs):
        FromRLlibNewStackDocs.seen.append(("created", env_runner, env, metrics_logger))

    def on_episode_start(self, *, episode, env_runner=None, metrics_logger=None, env=None, env_index, rl_module=None, **kwargs):
        FromRLlibNewStackDocs.seen.append(("start", env_runner, env, rl_module, env_index))

    def on_episode_end(
        self, *, episode, prev_episode_chunks=None, env_runner=None, metrics_logger=None, env=None, env_index,
        rl_module=None, worker=None, base_env=None, policies=None, **kwargs,
    ):  # fmt: skip
        FromRLlibNewStackDocs.seen.append(("end", env_runner, env, rl_module, env_index, prev_episode_chunks))


def test_the_newer_api_s_episode_arguments_are_the_runner_s_env_and_model(make_algo) -> None:
    FromRLlibNewStackDocs.seen = []
    algo = make_algo(ppo(FromRLlibNewStackDocs))
    algo.train()
    runner, model = algo.env_runner_group.local_env_runner, algo.get_policy().model
    assert FromRLlibNewStackDocs.seen[0] == ("created", runner, runner.base_env, None)
    episodes = FromRLlibNewStackDocs.seen[1:]
    assert {entry[0] for entry in episodes} == {"start", "end"}
    assert all(entry[1:4] == (runner, runner.base_env, model) for entry in episodes)
    assert all(entry[5] is None for entry in episodes if entry[0] == "end")  # RLlib's default: corral's episode is whole


class MultiAgentTrajectories(DefaultCallbacks):
    calls: ClassVar[list[tuple[Any, ...]]] = []
    created: ClassVar[list[str]] = []
    modules: ClassVar[list[tuple[Any, ...]]] = []

    def on_create_policy(self, *, policy_id, policy):
        MultiAgentTrajectories.created.append(policy_id)

    def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, env=None, rl_module=None, **kwargs):
        MultiAgentTrajectories.modules.append((base_env, env, env_index, rl_module, policies))

    def on_postprocess_trajectory(
        self, *, worker, episode, agent_id, policy_id, policies, postprocessed_batch, original_batches, **kwargs
    ):
        MultiAgentTrajectories.calls.append((episode, agent_id, policy_id, policies, postprocessed_batch, original_batches))


def test_a_multi_agent_trajectory_comes_with_every_agent_s_batch_of_its_sub_environment(make_algo) -> None:
    MultiAgentTrajectories.calls, MultiAgentTrajectories.created, MultiAgentTrajectories.modules = [], [], []
    config = ppo(MultiAgentTrajectories, "corral.testing.envs:MultiAgentCartPole", env_config={"num_agents": 2})
    config.multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
    algo = make_algo(config)
    algo.train()
    assert sorted(MultiAgentTrajectories.created) == ["p0", "p1"]
    assert MultiAgentTrajectories.calls
    for episode, agent_id, policy_id, policies, post, originals in MultiAgentTrajectories.calls:
        assert isinstance(episode, MultiAgentEpisode) and episode.policy_for(agent_id) == policy_id == f"p{agent_id}"
        assert set(originals) == {0, 1}  # both agents of the sub-environment, whatever policy acts for them
        for agent, (original_policy_id, original_policy, original) in originals.items():
            assert original_policy_id == f"p{agent}" and original_policy is policies[f"p{agent}"]
            assert SampleBatch.ADVANTAGES not in original
        assert originals[agent_id][2].count == post.count and SampleBatch.ADVANTAGES in post
    for base_env, env, env_index, rl_module, policies in MultiAgentTrajectories.modules:
        assert env is base_env[env_index]
        assert set(rl_module) == {"p0", "p1"} and all(rl_module[p] is policies[p].model for p in ("p0", "p1"))
    algo.add_policy("p2")
    assert MultiAgentTrajectories.created[-1] == "p2"


def test_without_connectors_each_original_batch_is_rllib_s_older_policy_and_batch_pair(make_algo) -> None:
    MultiAgentTrajectories.calls = []
    config = ppo(MultiAgentTrajectories, "corral.testing.envs:MultiAgentCartPole", env_config={"num_agents": 2})
    config.multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
    make_algo(config.env_runners(enable_connectors=False)).train()
    assert MultiAgentTrajectories.calls
    for _, _, _, policies, _, originals in MultiAgentTrajectories.calls:
        for agent, (original_policy, original) in originals.items():  # centralized_critic_2's `_, batch = ...`
            assert original_policy is policies[f"p{agent}"] and isinstance(original, SampleBatch)


class Restarts(DefaultCallbacks):
    made: ClassVar[list[tuple[int, Any]]] = []

    def on_sub_environment_created(self, *, worker, sub_environment, env_context, env_index=None, **kwargs):
        Restarts.made.append((env_index, sub_environment))


def test_a_restarted_sub_environment_is_created_anew_for_the_hook_and_foreach_env(make_algo) -> None:
    Restarts.made = []
    config = ppo(Restarts, "tests.toy_envs:BrokenCartPole", env_config={"reward": math.nan, "only_vector": 1})
    algo = make_algo(config.fault_tolerance(restart_failed_sub_environments=True))
    algo.train()
    runner = algo.env_runner_group.local_env_runner
    by_index = {i: [env for index, env in Restarts.made if index == i] for i in range(NUM_ENVS)}
    assert len(by_index[0]) == len(by_index[2]) == 1 and len(by_index[1]) > 1  # 1 breaks at every episode's third step
    assert runner.sub_environments == [by_index[i][-1] for i in range(NUM_ENVS)]
    assert runner.foreach_env(lambda env: type(env).__name__) == ["BrokenCartPole"] * NUM_ENVS


@pytest.mark.parametrize(
    ("hook", "said"),
    [
        ("on_episode_created", "on_episode_created is RLlib's hook, which corral never calls; use on_episode_start"),
        ("on_trainer_init", "use on_algorithm_init"),
        ("on_evaluate_offline_start", "no offline evaluation runners"),
    ],
)
def test_an_rllib_hook_corral_never_calls_is_refused_with_what_to_use(make_algo, hook: str, said: str) -> None:
    never_called = type("NeverCalled", (DefaultCallbacks,), {hook: lambda self, **kwargs: None})
    with pytest.raises(ConfigError, match=said):
        make_algo(ppo(never_called))


def test_a_required_metrics_logger_is_refused_with_what_corral_offers(make_algo) -> None:
    class NewStack(DefaultCallbacks):
        def on_episode_end(self, *, episode, metrics_logger, **kwargs):
            pass

    with pytest.raises(ConfigError, match=r"requires 'metrics_logger'.*corral has no MetricsLogger.*episode\.custom_metrics"):
        make_algo(ppo(NewStack))

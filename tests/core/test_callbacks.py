"""Callbacks through training a tiny PPO on CartPole: every hook, its arguments, composition."""

from __future__ import annotations

import math
from collections import Counter
from typing import ClassVar

import pytest

from corral import Callbacks, ConfigError, DefaultCallbacks, EnvContext, MultiAgentBatch, MultiCallbacks, SampleBatch
from corral.core.training.algorithm import Algorithm
from corral.plugins.ppo import PPO, PPOConfig

NUM_ENVS = 4


def tiny_ppo(callbacks, tmp_path, smoothing: int = 100, **evaluation) -> PPO:
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=NUM_ENVS)
        .training(train_batch_size=256, minibatch_size=64, num_epochs=1, model={"fcnet_hiddens": [16]})
        .debugging(seed=0)
        .reporting(storage_path=str(tmp_path), metrics_num_episodes_for_smoothing=smoothing)
        .callbacks(callbacks)
    )
    if evaluation:
        config.evaluation(**evaluation)
    return config.build()


class Recorder(Callbacks):
    """Overrides every hook with RLlib's keyword-only style, recording what it sees."""

    def __init__(self):
        self.calls = Counter()
        self.events = []  # (hook, episode_id) in call order
        self.steps = Counter()  # episode_id -> on_episode_step calls
        self.ended = []  # (episode_id, length, total_reward, terminated, truncated)
        self.sampled_env_steps = 0
        self.problems = []

    def on_algorithm_init(self, *, algorithm, **kwargs):
        self.calls["on_algorithm_init"] += 1
        self.algorithm = algorithm
        if not isinstance(algorithm, PPO) or not algorithm.policies:
            self.problems.append("algorithm_init before the algorithm was built")

    def on_environment_created(self, *, env_runner, env, env_context, **kwargs):
        self.calls["on_environment_created"] += 1
        if not isinstance(env_context, EnvContext) or env_context.worker_index != 0:
            self.problems.append(f"env_context {env_context!r}")
        if env is not env_runner.base_env or kwargs.get("worker") is not env_runner:
            self.problems.append("environment_created arguments")
        self.num_envs = env.num_envs

    def on_episode_start(self, *, episode, env_runner, env_index, **kwargs):
        self.calls["on_episode_start"] += 1
        self.events.append(("start", episode.episode_id))
        episode.user_data["start_index"] = env_index
        episode.user_data["rewards"] = []
        if episode.length != 0 or episode.last_observation is None:
            self.problems.append("episode_start sees a used episode")
        if "policies" not in kwargs or "default_policy" not in kwargs["policies"]:
            self.problems.append("episode_start without policies")

    def on_episode_step(self, *, episode, env_runner, env_index, **kwargs):
        self.calls["on_episode_step"] += 1
        self.steps[episode.episode_id] += 1
        episode.user_data["rewards"].append(episode.last_reward)
        if episode.length != self.steps[episode.episode_id]:
            self.problems.append("episode.length does not count the steps")

    def on_episode_end(self, *, episode, env_runner, env_index, **kwargs):
        self.calls["on_episode_end"] += 1
        self.events.append(("end", episode.episode_id))
        if episode.user_data.get("start_index") != env_index:
            self.problems.append("user_data lost between start and end")
        if sum(episode.user_data["rewards"]) != episode.total_reward:
            self.problems.append("total_reward is not the sum of step rewards")
        self.ended.append((episode.episode_id, episode.length, episode.total_reward, episode.terminated, episode.truncated))

    def on_sample_end(self, *, env_runner, samples, **kwargs):
        self.calls["on_sample_end"] += 1
        if not isinstance(samples, MultiAgentBatch):
            self.problems.append("samples is not a MultiAgentBatch")
        self.sampled_env_steps += samples.env_steps

    def on_postprocess_trajectory(self, *, policy_id, policy, postprocessed_batch, **kwargs):
        self.calls["on_postprocess_trajectory"] += 1
        if policy_id != "default_policy" or policy is not self.algorithm.get_policy():
            self.problems.append("postprocess_trajectory policy")
        if SampleBatch.ADVANTAGES not in postprocessed_batch or SampleBatch.VALUE_TARGETS not in postprocessed_batch:
            self.problems.append("postprocessed batch without advantages")

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        self.calls["on_learn_on_batch"] += 1
        self.train_batch_count = train_batch.count
        result["callback_batch_rows"] = train_batch.count

    def on_train_result(self, *, algorithm, result, **kwargs):
        self.calls["on_train_result"] += 1
        result["callback_saw_iteration"] = result["training_iteration"]

    def on_evaluate_start(self, *, algorithm, **kwargs):
        self.calls["on_evaluate_start"] += 1

    def on_evaluate_end(self, *, algorithm, evaluation_metrics, **kwargs):
        self.calls["on_evaluate_end"] += 1
        self.evaluation_metrics = dict(evaluation_metrics)

    def on_checkpoint_loaded(self, *, algorithm, **kwargs):
        self.calls["on_checkpoint_loaded"] += 1


def _instance(algo, cls):
    (found,) = [cb for cb in algo.callbacks.callbacks if type(cb) is cls]
    return found


def test_every_hook_is_called_with_its_arguments(tmp_path):
    algo = tiny_ppo(Recorder, tmp_path)
    try:
        rec = _instance(algo, Recorder)
        assert rec.calls == {"on_algorithm_init": 1, "on_environment_created": 1}
        assert rec.num_envs == NUM_ENVS

        results = [algo.train() for _ in range(2)]
        # each batch of 256 steps is one sample call, topped up by a second for the reset rows;
        # each call postprocesses every sub-environment's trajectory on its own, as RLlib's hook sees them
        assert rec.calls["on_sample_end"] == 4
        assert rec.calls["on_postprocess_trajectory"] == 4 * NUM_ENVS
        assert rec.calls["on_learn_on_batch"] == 2
        assert rec.calls["on_train_result"] == 2
        assert rec.sampled_env_steps == results[-1]["num_env_steps_sampled"]
        assert rec.train_batch_count == results[-1]["num_env_steps_sampled"] - results[0]["num_env_steps_sampled"]
        assert [r["callback_saw_iteration"] for r in results] == [1, 2]
        assert results[-1]["info"]["learner"]["default_policy"]["custom_metrics"]["callback_batch_rows"] == rec.train_batch_count

        # episodes: every step hook belongs to a started episode, starts precede ends
        assert rec.calls["on_episode_end"] == sum(r["episodes_this_iter"] for r in results) > 0
        started = set()
        for kind, episode_id in rec.events:
            if kind == "start":
                assert episode_id not in started
                started.add(episode_id)
            else:
                assert episode_id in started
        # every sub-environment has at most one episode in progress
        ends = rec.calls["on_episode_end"]
        assert ends < rec.calls["on_episode_start"] == len(started) <= ends + NUM_ENVS
        assert sum(rec.steps.values()) == rec.calls["on_episode_step"] == results[-1]["num_env_steps_sampled"]
        for episode_id, length, total_reward, terminated, truncated in rec.ended:
            assert length == rec.steps[episode_id] > 0
            assert total_reward == float(length)  # CartPole pays 1 per step
            assert terminated != truncated
        lengths = [length for _, length, _, _, _ in rec.ended]
        assert results[-1]["episode_len_mean"] == pytest.approx(sum(lengths) / len(lengths))
        assert results[-1]["episodes_total"] == len(rec.ended)

        # evaluation hooks
        metrics = algo.evaluate()
        assert rec.calls["on_evaluate_start"] == rec.calls["on_evaluate_end"] == 1
        assert rec.evaluation_metrics == metrics
        assert rec.calls["on_environment_created"] == 2  # the evaluation runner's env

        # checkpoint hook
        path = algo.save(tmp_path / "checkpoint")
        algo.restore(path)
        assert rec.calls["on_checkpoint_loaded"] == 1
        assert rec.calls["on_algorithm_init"] == 1
        assert rec.problems == []
    finally:
        algo.stop()


def test_evaluate_hooks_run_on_schedule(tmp_path):
    class EvalCounter(Callbacks):
        starts = 0
        ends: ClassVar[list[dict]] = []

        def on_evaluate_start(self, *, algorithm, **kwargs):
            EvalCounter.starts += 1

        def on_evaluate_end(self, *, algorithm, evaluation_metrics, **kwargs):
            EvalCounter.ends.append(evaluation_metrics)

    algo = tiny_ppo(EvalCounter, tmp_path, evaluation_interval=2, evaluation_duration=2)
    try:
        results = [algo.train() for _ in range(2)]
    finally:
        algo.stop()
    assert EvalCounter.starts == 1
    assert "evaluation" not in results[0]
    assert EvalCounter.ends == [results[1]["evaluation"]]
    assert results[1]["evaluation"]["episodes_this_iter"] == 2


def test_checkpoint_loaded_on_from_checkpoint(tmp_path):
    algo = tiny_ppo(ModuleLevelCounter, tmp_path)
    try:
        algo.train()
        path = algo.save(tmp_path / "ckpt")
    finally:
        algo.stop()
    ModuleLevelCounter.loaded = 0
    ModuleLevelCounter.inits = 0
    restored = Algorithm.from_checkpoint(path, trust_code=True)  # the checkpoint names this test module's class
    try:
        assert ModuleLevelCounter.inits == 1
        assert ModuleLevelCounter.loaded == 1
        assert restored.iteration == 1
    finally:
        restored.stop()


class ModuleLevelCounter(Callbacks):
    """Importable by path, so that from_checkpoint(trust_code=True) can rebuild the config."""

    loaded = 0
    inits = 0

    def on_algorithm_init(self, *, algorithm, **kwargs):
        ModuleLevelCounter.inits += 1

    def on_checkpoint_loaded(self, *, algorithm, **kwargs):
        ModuleLevelCounter.loaded += 1


def test_subset_and_positional_signatures(tmp_path):
    seen = []

    class Subset(Callbacks):
        def on_episode_end(self, episode):  # positional-or-keyword, one of five arguments
            seen.append(("end", episode.length))

        def on_train_result(self, result):
            seen.append(("result", result["training_iteration"]))

        def on_sample_end(self, *, samples):  # keyword-only, no **kwargs
            seen.append(("sample", samples.env_steps))

    algo = tiny_ppo(Subset, tmp_path)
    try:
        result = algo.train()
    finally:
        algo.stop()
    kinds = Counter(kind for kind, _ in seen)
    assert kinds["result"] == 1 and kinds["sample"] == 2  # the batch, and a top-up for its reset rows
    assert kinds["end"] == result["episodes_this_iter"] > 0
    assert ("result", 1) in seen
    assert sum(steps for kind, steps in seen if kind == "sample") == result["num_env_steps_sampled"]


def test_optional_unknown_argument_is_allowed(tmp_path):
    seen = []

    class WithDefault(Callbacks):
        def on_train_result(self, *, result, base_env=None, metrics_logger=None):
            seen.append((result["training_iteration"], base_env, metrics_logger))

    algo = tiny_ppo(WithDefault, tmp_path)
    try:
        algo.train()
    finally:
        algo.stop()
    assert seen == [(1, None, None)]


def test_rllib_style_episode_hook_gets_base_env(tmp_path):
    seen = []
    steps = []

    class OldApi(Callbacks):
        def on_episode_step(self, *, episode, **kwargs):  # RLlib's per-agent getters, its one agent "agent0"
            steps.append((episode.last_observation_for(), episode.last_action_for(), episode.last_info_for("agent1")))

        def on_episode_end(self, *, worker, base_env, policies, episode, env_index, **kwargs):
            seen.append((worker, base_env, sorted(policies), env_index))

    algo = tiny_ppo(OldApi, tmp_path)
    try:
        algo.train()
        runner = algo.env_runner_group.local_env_runner
    finally:
        algo.stop()
    assert seen
    worker, base_env, policies, env_index = seen[0]
    assert worker is runner and base_env is runner.base_env
    assert policies == ["default_policy"] and 0 <= env_index < runner.num_envs
    observation, action, nobody = steps[0]
    assert observation.shape == (4,) and action in (0, 1) and nobody is None


def test_required_unknown_argument_fails_at_build(tmp_path):
    class Bad(Callbacks):
        def on_episode_end(self, *, episode, metrics_logger, **kwargs):
            pass

    with pytest.raises(ConfigError) as info:
        tiny_ppo(Bad, tmp_path)
    message = str(info.value)
    assert "on_episode_end" in message
    assert "'metrics_logger'" in message
    assert "episode" in message  # lists what the hook passes


def _ordered(log, name):
    class Ordered(Callbacks):
        def on_train_result(self, *, result, **kwargs):
            log.append(name)
            result.setdefault("order", []).append(name)

        def on_episode_start(self, *, episode, **kwargs):
            episode.user_data.setdefault("order", []).append(name)

        def on_episode_end(self, *, episode, **kwargs):
            log.append(("episode", tuple(episode.user_data["order"])))

    Ordered.__name__ = Ordered.__qualname__ = name
    return Ordered


@pytest.mark.parametrize("order", [("A", "B"), ("B", "A")])
def test_two_callbacks_compose_in_the_given_order(tmp_path, order):
    log = []
    classes = {name: _ordered(log, name) for name in ("A", "B")}
    algo = tiny_ppo([classes[name] for name in order], tmp_path)
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["order"] == list(order)
    assert [entry for entry in log if isinstance(entry, str)] == list(order)
    episode_orders = {entry[1] for entry in log if isinstance(entry, tuple)}
    assert episode_orders == {order}


def test_multi_callbacks_alias(tmp_path):
    log = []
    a, b = _ordered(log, "A"), _ordered(log, "B")
    assert MultiCallbacks([a, b]) == [a, b]
    algo = tiny_ppo(MultiCallbacks([a, b]), tmp_path)
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["order"] == ["A", "B"]
    assert DefaultCallbacks is Callbacks


def test_same_class_twice_runs_twice(tmp_path):
    log = []
    a = _ordered(log, "A")
    algo = tiny_ppo([a, a], tmp_path)
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["order"] == ["A", "A"]


class PoleLength(Callbacks):
    def on_episode_start(self, *, episode, **kwargs):
        episode.user_data["marker"] = episode.episode_id

    def on_episode_end(self, *, episode, **kwargs):
        assert episode.user_data["marker"] == episode.episode_id
        episode.custom_metrics["pole_len"] = episode.length
        episode.custom_metrics["constant"] = 2.5

    def on_train_result(self, *, result, **kwargs):
        result["my_key"] = "added by callback"


def test_custom_metrics_are_aggregated_over_the_smoothing_window(tmp_path):
    algo = tiny_ppo(PoleLength, tmp_path)
    try:
        results = [algo.train() for _ in range(3)]
    finally:
        algo.stop()
    # three iterations of short CartPole episodes overflow neither window (default 100)
    # nor differ in membership: custom metrics and episode_len_mean cover the same episodes
    for result in results:
        custom = result["custom_metrics"]
        assert set(custom) == {"pole_len_mean", "pole_len_min", "pole_len_max", "constant_mean", "constant_min", "constant_max"}
        assert custom["pole_len_mean"] == pytest.approx(result["episode_len_mean"])
        assert custom["pole_len_min"] <= custom["pole_len_mean"] <= custom["pole_len_max"]
        assert custom["constant_mean"] == custom["constant_min"] == custom["constant_max"] == 2.5
        assert result["my_key"] == "added by callback"
        # CartPole's reward is the length, so the reward range is the length range
        assert custom["pole_len_min"] == result["episode_reward_min"]
        assert custom["pole_len_max"] == result["episode_reward_max"]


def test_custom_metrics_window_matches_episode_metrics_when_it_overflows(tmp_path):
    algo = tiny_ppo(PoleLength, tmp_path, smoothing=3)
    try:
        results = [algo.train() for _ in range(2)]
    finally:
        algo.stop()
    for result in results:
        assert result["episodes_total"] > 3
        assert result["custom_metrics"]["pole_len_mean"] == pytest.approx(result["episode_len_mean"])
        assert result["custom_metrics"]["pole_len_max"] == result["episode_reward_max"]


def test_no_custom_metrics_gives_empty_dict(tmp_path):
    algo = tiny_ppo([], tmp_path)
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["custom_metrics"] == {}
    assert result["episodes_this_iter"] > 0
    assert not math.isnan(result["episode_len_mean"])

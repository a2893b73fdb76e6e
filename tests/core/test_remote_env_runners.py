"""Remote env runners on Ray (started here, on two CPUs): sampling, broadcast, foreach, failures, stop."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from typing import Any, ClassVar

import pytest
import ray

from corral import DefaultCallbacks, get_config
from corral.errors import ConfigError, EnvRunnerError

FLAKY = "tests.toy_envs:FlakyCartPole"
SMALL = {"train_batch_size": 256, "minibatch_size": 128, "num_epochs": 1, "num_envs_per_env_runner": 2}


pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")


def ppo(runners: int = 2, env: str = "CartPole-v1", **overrides):
    return get_config("PPO").environment(env).update_from_dict({**SMALL, "num_env_runners": runners, "seed": 0, **overrides})


@pytest.fixture
def build():
    """Build algorithms and stop them (releasing their actors) at teardown."""
    built = []

    def make(config):
        algo = config.build()
        built.append(algo)
        return algo

    yield make
    for algo in built:
        algo.stop()


def test_two_remote_runners_sample_in_their_own_processes(build) -> None:
    algo = build(ppo())
    result = algo.train()
    assert result["num_healthy_env_runners"] == 2 and result["num_env_runner_restarts"] == 0
    assert result["num_env_steps_sampled"] > 200  # 256 steps less the rows where sub-environments reset
    group = algo.env_runner_group
    assert group.foreach_env_runner(lambda r: r.worker_index) == [0, 1, 2]
    pids = group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert algo.workers.foreach_worker(lambda r: r.worker_index, local_env_runner=False, remote_worker_ids=[2]) == [2]


def test_weights_are_put_in_the_object_store_once_per_sample_call(build, monkeypatch) -> None:
    algo = build(ppo())
    algo.train()
    group = algo.env_runner_group
    puts = []
    real_put = group._ray.put
    monkeypatch.setattr(group._ray, "put", lambda value: puts.append(value) or real_put(value))
    expected = algo.get_policy().get_weights()
    group.sample()
    assert len(puts) == 1
    for remote in group.foreach_env_runner(lambda r: r.policy.get_weights(), local_env_runner=False):
        assert remote.keys() == expected.keys() and all((remote[k] == expected[k]).all() for k in expected)


@pytest.mark.parametrize("algo_name, env, overrides", [
    ("A2C", "CartPole-v1", {"num_envs_per_env_runner": 2, "min_sample_timesteps_per_iteration": 64}),
    ("DQN", "CartPole-v1",
     {"num_envs_per_env_runner": 2, "learning_starts": 32, "train_batch_size": 16, "min_sample_timesteps_per_iteration": 100}),
    ("SAC", "Pendulum-v1",
     {"num_envs_per_env_runner": 1, "learning_starts": 32, "train_batch_size": 16, "training_intensity": 16}),
    ("IMPALA", "CartPole-v1", {"num_envs_per_env_runner": 2, "rollout_fragment_length": 16, "train_batch_size": 64}),
])  # fmt: skip
def test_every_built_in_algorithm_trains_with_remote_runners(build, algo_name, env, overrides) -> None:
    config = get_config(algo_name).environment(env).update_from_dict({**overrides, "num_env_runners": 2, "seed": 0})
    algo = build(config)
    for _ in range(2):
        result = algo.train()
    assert result["num_healthy_env_runners"] == 2
    assert result["num_env_steps_trained"] > 0


def filter_counts(group) -> list[float]:
    return group.foreach_env_runner(lambda r: r.policy.observation_filter.count, local_env_runner=False)


def test_the_observation_filter_gathers_every_runners_statistics_and_sends_the_totals_back(build) -> None:
    import numpy as np

    from corral.core.learning.filters import MeanStdFilter

    # Pendulum's episodes outlast both iterations: no reset rows, so each batch is one sample call
    algo = build(ppo(env="Pendulum-v1", observation_filter="MeanStdFilter"))
    algo.train()  # 256 observations: 2 runners x 2 envs x 64 steps
    group = algo.env_runner_group
    states = group.foreach_env_runner(lambda r: r.policy.observation_filter.get_state(), local_env_runner=False)
    expected = MeanStdFilter((3,))
    for state in states:
        expected.merge({"mean": state["mean"].numpy(), "var": state["var"].numpy(), "count": state["count"]})
    learner = algo.get_policy().observation_filter
    assert learner.count == expected.count == 256
    np.testing.assert_allclose(learner.mean, expected.mean, rtol=1e-10)
    np.testing.assert_allclose(learner.var, expected.var, rtol=1e-10)
    algo.train()
    assert filter_counts(group) == [256 + 128, 256 + 128]  # each started from the learner's totals
    assert learner.count == 512


def test_evaluation_actors_normalise_with_the_learners_filter(build) -> None:
    algo = build(
        ppo(runners=0, env="Pendulum-v1", observation_filter="MeanStdFilter").evaluation(
            evaluation_interval=1, evaluation_num_env_runners=2
        )
    )
    algo.train()
    learner = algo.get_policy().observation_filter
    assert filter_counts(algo._evaluation_runners()) == [learner.count, learner.count] and learner.count == 256


def test_a_runner_failing_more_times_in_a_row_than_tolerated_stops_the_run(build) -> None:
    """RLlib's num_consecutive_worker_failures_tolerance: a success in between starts the count again."""
    from corral.errors import EnvRunnerError

    algo = build(ppo(recreate_failed_env_runners=True, num_consecutive_worker_failures_tolerance=1))
    group = algo.env_runner_group

    def crash_runner_1() -> None:
        group.foreach_env_runner(lambda r: os._exit(1), local_env_runner=False, remote_worker_ids=[1])

    crash_runner_1()  # once: replaced
    algo.train()  # its calls succeed again
    crash_runner_1()  # once more, but not in a row: replaced
    group.replace_failed()
    with pytest.raises(EnvRunnerError, match=r"env runner 1 \(CartPole-v1\) failed 2 times in a row, more than .*=1"):
        crash_runner_1()


class Recreated(DefaultCallbacks):
    """RLlib's hooks on replaced runners, under both of its names."""

    calls: ClassVar[list[tuple[Any, ...]]] = []

    def on_env_runners_recreated(self, *, algorithm, env_runner_group, env_runner_indices, is_evaluation, **kwargs):
        Recreated.calls.append(("env_runners", algorithm, env_runner_group, env_runner_indices, is_evaluation))

    def on_workers_recreated(self, *, algorithm, worker_set, worker_ids, is_evaluation, **kwargs):
        Recreated.calls.append(("workers", algorithm, worker_set, worker_ids, is_evaluation))


def test_a_killed_runner_is_recreated_and_training_goes_on(build) -> None:
    Recreated.calls = []
    algo = build(ppo(recreate_failed_env_runners=True).callbacks(Recreated))
    algo.train()
    group = algo.env_runner_group
    before = group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    assert group.foreach_env_runner(lambda r: os._exit(1), local_env_runner=False, remote_worker_ids=[1]) == []
    result = algo.train()
    assert result["num_healthy_env_runners"] == 2 and result["num_env_runner_restarts"] == 1
    after = group.foreach_env_runner(lambda r: (r.worker_index, os.getpid()), local_env_runner=False)
    assert [index for index, _ in after] == [1, 2]
    assert after[0][1] != before[0] and after[1][1] == before[1]
    assert Recreated.calls == [(name, algo, group, [1], False) for name in ("env_runners", "workers")]


def test_with_ignore_failures_training_goes_on_with_fewer_runners(build) -> None:
    algo = build(ppo(ignore_env_runner_failures=True))
    first = algo.train()
    algo.env_runner_group.foreach_env_runner(lambda r: os._exit(1), local_env_runner=False, remote_worker_ids=[2])
    second = algo.train()
    assert second["num_healthy_env_runners"] == 1 and second["num_env_runner_restarts"] == 0
    assert second["num_env_steps_sampled"] > first["num_env_steps_sampled"]
    assert algo.env_runner_group.foreach_env_runner(lambda r: r.worker_index, local_env_runner=False) == [1]


@pytest.mark.parametrize("option", ["ignore_env_runner_failures", "recreate_failed_env_runners"])
def test_two_failed_calls_on_one_runner_are_handled_once(build, option, caplog) -> None:
    """The asynchronous sampler may hold two calls on a runner that died; the second failure is the same one."""
    algo = build(ppo(**{option: True}))
    group = algo.env_runner_group
    with caplog.at_level("WARNING", logger="corral"):
        for _ in range(2):
            group.handle_failure(2, RuntimeError("the actor died"))
    assert caplog.text.count("env runner 2") == 1
    assert group.num_healthy_remote_runners == 1


def test_an_untolerated_failure_names_the_runner_and_the_sub_environment(build) -> None:
    algo = build(ppo(env=FLAKY, env_config={"fail_worker": 2, "fail_vector": 1}))
    with pytest.raises(EnvRunnerError) as error:
        algo.train()
    message = str(error.value)
    assert "env runner 2" in message and "sub-environment 1 of env runner 2" in message
    assert "RuntimeError: flaky sub-environment (2, 1) broke" in message
    assert 'tests/toy_envs.py", line' in message and "\x1b[" not in message  # the remote traceback, without colours
    assert "recreate_failed_env_runners=True" in message


def test_a_failed_sub_environment_is_restarted_inside_its_runner(build) -> None:
    algo = build(
        ppo(env=FLAKY, env_config={"fail_worker": 1, "fail_vector": 0, "once": True}, restart_failed_sub_environments=True)
    )
    for _ in range(2):
        result = algo.train()
    assert result["num_healthy_env_runners"] == 2 and result["num_env_runner_restarts"] == 0
    restarts = algo.env_runner_group.foreach_env_runner(lambda r: [e.restarts for e in r.base_env.envs], local_env_runner=False)
    assert restarts == [[1, 0], [0, 0]]


def test_stop_releases_every_actor(build) -> None:
    algo = build(ppo())
    actors = algo.env_runner_group.remote_env_runners
    assert len(actors) == 2
    algo.stop()
    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            for _ in range(100):  # ray.kill is asynchronous: a call may still get through right after it
                ray.get(actor.ping.remote(), timeout=30)
                time.sleep(0.1)


def test_without_ray_installed_remote_runners_are_a_config_error(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(ConfigError, match=r"num_env_runners=2 .* pip install 'corral\[ray\]'"):
        ppo().build()


@pytest.mark.parametrize("algo_name", ["PPO", "IMPALA"])  # IMPALA imports the asynchronous sampler
def test_zero_remote_runners_never_import_ray(algo_name) -> None:
    code = (
        "import sys; from corral import get_config; "
        f"a = get_config('{algo_name}').environment('CartPole-v1').training(train_batch_size=256).build(); "
        "a.train(); a.stop(); print('ray' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CORRAL_RESULTS_DIR": os.environ["CORRAL_RESULTS_DIR"]})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("parallel", [False, True])
def test_evaluation_runs_on_its_own_actors_with_the_latest_weights(build, parallel) -> None:
    config = ppo(runners=0).evaluation(
        evaluation_interval=1, evaluation_duration=5, evaluation_num_env_runners=2,
        evaluation_parallel_to_training=parallel,
    )  # fmt: skip
    algo = build(config)
    result = algo.train()
    assert result["evaluation"]["episodes_this_iter"] == 5
    assert result["evaluation"]["episode_reward_mean"] > 0
    group = algo._evaluation_runners()
    pids = group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    assert len(set(pids)) == 2 and os.getpid() not in pids
    metrics = algo.evaluate()
    assert metrics["episodes_this_iter"] == 5
    expected = algo.get_policy().get_weights()
    for remote in group.foreach_env_runner(lambda r: r.policy.get_weights(), local_env_runner=False):
        assert all((remote[k] == expected[k]).all() for k in expected)
    assert group.foreach_env_runner(lambda r: r.config.explore, local_env_runner=False) == [False, False]


def test_parallel_evaluation_needs_evaluation_actors() -> None:
    with pytest.raises(ConfigError, match="evaluation_parallel_to_training needs evaluation actors"):
        ppo(runners=0).evaluation(evaluation_interval=1, evaluation_parallel_to_training=True).build()


def test_a_runner_that_cannot_start_fails_the_build_and_releases_the_others() -> None:
    with pytest.raises(EnvRunnerError, match=r"could not start(.|\n)*only the local runner may build this env"):
        ppo(env="tests.toy_envs:LocalOnlyEnv").build()
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0) == 2  # both actors were released


def test_runners_waiting_for_cpus_are_waited_for_with_a_warning_that_says_what_they_need(build, monkeypatch, caplog) -> None:
    import threading

    from corral.core.sampling import env_runner_group

    monkeypatch.setattr(env_runner_group, "START_WARNING_INTERVAL_S", 0.5)
    holder = build(ppo())  # holds both CPUs
    built = []
    waiting = threading.Thread(target=lambda: built.append(build(ppo())))
    with caplog.at_level("WARNING", logger="corral"):
        waiting.start()
        deadline = time.monotonic() + 60
        while "still waiting to start" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "num_cpus_per_env_runner=1" in caplog.text and "free" in caplog.text
        holder.stop()
        waiting.join(timeout=60)
    assert built and built[0].train()["num_healthy_env_runners"] == 2


def tuned_example(file: str, **overrides):
    """A tuned example's config with overrides (here: remote runners), ready to build."""
    from pathlib import Path

    import yaml

    import corral

    (spec,) = yaml.safe_load((Path(corral.__file__).parent / "tuned_examples" / file).read_text()).values()
    return (
        get_config(spec["run"])
        .environment(spec["env"])
        .update_from_dict({**spec["config"], **overrides, "log_to_tensorboard": False})
    )


def best_reward_within(algo, budget: int, threshold: float) -> float:
    """Train until the smoothed return reaches ``threshold`` or ``budget`` env steps pass; the best return seen."""
    best = float("-inf")
    while algo.counters["num_env_steps_sampled"] < budget and best < threshold:
        result = algo.train()
        assert result["num_healthy_env_runners"] == algo.config.num_env_runners
        best = max(best, result["episode_reward_mean"])
    return best


@pytest.mark.slow
def test_ppo_with_two_remote_runners_reaches_475_on_cartpole_within_150k_steps(build) -> None:
    algo = build(tuned_example("ppo_cartpole.yaml", num_env_runners=2, num_envs_per_env_runner=8, seed=0))
    best = best_reward_within(algo, 150_000, 475)
    assert best >= 475, f"PPO with 2 remote runners reached {best:.1f} within 150k env steps"


@pytest.mark.slow
def test_impala_with_two_remote_runners_reaches_400_on_cartpole_within_1m_steps(build) -> None:
    # one sample call in flight per runner and a short learner queue bound the policy lag however busy the machine
    # (a loaded learner otherwise trains on batches up to 16 versions old); async runs are not reproducible:
    # beside one busy core, seed 0 reached 400 after 176k-420k steps over 8 runs, and a CI run once ended 500k
    # steps at 392.7, so the budget is twice the local tuned example's (a run that learns stops at the bar)
    config = tuned_example(
        "impala_cartpole.yaml",
        num_env_runners=2,
        num_envs_per_env_runner=5,
        max_requests_in_flight_per_env_runner=1,
        learner_queue_size=2,
        seed=0,
    )
    algo = build(config)
    best = best_reward_within(algo, 1_000_000, 400)
    assert best >= 400, f"IMPALA with 2 remote runners reached {best:.1f} within 1M env steps"


def test_an_env_registered_in_the_driver_reaches_the_remote_runners(build) -> None:
    """RLlib users register an env once, in the driver; the runners, in their own processes, find it too."""
    import gymnasium as gym

    from corral import register_env

    register_env("corral-test-remote-registered", lambda ctx: gym.make("CartPole-v1", max_episode_steps=20 + ctx.worker_index))
    algo = build(ppo(env="corral-test-remote-registered"))
    assert algo.train()["num_healthy_env_runners"] == 2
    limits = algo.env_runner_group.foreach_env_runner(lambda r: r.env.spec.max_episode_steps, local_env_runner=False)
    assert limits == [21, 22], "each runner built the env with its own creator call"


def test_several_policies_sample_on_remote_runners_and_only_those_to_train_learn(build) -> None:
    from corral import make_multi_agent

    config = ppo(env=make_multi_agent("CartPole-v1"), env_config={"num_agents": 2}).multi_agent(
        policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}", policies_to_train=["p0"]
    )
    algo = build(config)
    frozen = algo.get_weights(["p1"])["p1"]
    result = algo.train()
    assert algo.env_runner_group.foreach_env_runner(lambda r: sorted(r.policy_map)) == [["p0", "p1"]] * 3
    assert set(result["policy_reward_mean"]) == {"p0", "p1"} and set(result["info"]["learner"]) == {"p0"}
    assert result["num_agent_steps_sampled"] > result["num_env_steps_sampled"]
    # the remote copies act with the learner's weights: p1's are the ones it was built with, everywhere
    remote = algo.env_runner_group.foreach_env_runner(lambda r: r.policy_map["p1"].get_weights(), local_env_runner=False)
    assert all(all((w[k] == frozen[k]).all() for k in frozen) for w in remote)
    # each learner policy's timestep moved by its own agents' steps on the runners
    assert sum(p.global_timestep for p in algo.policies.values()) == result["num_agent_steps_sampled"]


def test_impala_learns_several_policies_asynchronously(build) -> None:
    from corral import make_multi_agent

    config = (
        get_config("IMPALA")
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .update_from_dict({"train_batch_size": 200, "num_envs_per_env_runner": 2, "num_env_runners": 2, "seed": 0})
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
    )
    algo = build(config)
    for _ in range(3):
        result = algo.train()
    assert set(result["info"]["learner"]) == {"p0", "p1"}
    assert all("policy_lag_mean" in info["learner_stats"] for info in result["info"]["learner"].values())


def test_added_and_removed_policies_reach_every_remote_runner_and_a_replacement(build) -> None:
    from corral import make_multi_agent

    config = (
        ppo(env=make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
        .fault_tolerance(recreate_failed_env_runners=True)
    )
    algo = build(config)
    algo.train()
    snapshot = algo.add_policy(
        "snapshot",
        policy_state=algo.get_policy("p0").get_state(),
        policy_mapping_fn=lambda agent_id, episode, **kw: "p0" if agent_id == 0 else "snapshot",
        policies_to_train=["p0"],
    )
    policy_sets = algo.env_runner_group.foreach_env_runner(lambda r: sorted(r.policy_map))
    assert policy_sets == [["p0", "p1", "snapshot"]] * 3
    result = algo.train()
    assert "snapshot" in result["policy_reward_mean"] and set(result["info"]["learner"]) == {"p0"}
    frozen = snapshot.get_weights()
    remote = algo.env_runner_group.foreach_env_runner(lambda r: r.policy_map["snapshot"].get_weights(), local_env_runner=False)
    assert all(all((w[k] == frozen[k]).all() for k in frozen) for w in remote)

    algo.remove_policy("p1")
    assert algo.env_runner_group.foreach_env_runner(lambda r: sorted(r.policy_map)) == [["p0", "snapshot"]] * 3
    # a runner started in place of a failed one builds the current policy set, with the current mapping
    ray.kill(algo.env_runner_group.remote_env_runners[0])
    algo.train()
    result = algo.train()
    assert result["num_env_runner_restarts"] == 1
    assert algo.env_runner_group.foreach_env_runner(lambda r: sorted(r.policy_map)) == [["p0", "snapshot"]] * 3
    assert set(result["info"]["learner"]) == {"p0"}


def test_each_remote_runner_writes_its_own_output(build, tmp_path) -> None:
    import pyarrow.parquet as pq

    algo = build(ppo(output=str(tmp_path / "out")))
    algo.train()
    algo.train()
    sampled = algo.counters["num_env_steps_sampled"]
    algo.stop()
    files = sorted((tmp_path / "out").glob("output-*.parquet"))
    assert {f.name.split("_worker-")[1].split("_")[0] for f in files} == {"1", "2"}
    assert sum(pq.read_table(f).num_rows for f in files) == sampled


def test_foreach_worker_with_index_reaches_each_remote_runner_by_its_index(build) -> None:
    """RLlib's documented per-worker access: the local worker is 0, the remote ones 1..n."""
    algo = build(ppo())
    seen = algo.workers.foreach_worker_with_index(lambda worker, index: (index, worker.worker_index, type(worker.get_policy())))
    assert [(index, worker_index) for index, worker_index, _ in seen] == [(0, 0), (1, 1), (2, 2)]
    assert {policy_class.__name__ for _, _, policy_class in seen} == {"PPOPolicy"}
    assert algo.workers.foreach_worker_with_id(lambda index, worker: (index, worker.worker_index)) == [(0, 0), (1, 1), (2, 2)]
    assert algo.workers.foreach_env(lambda env: env.num_envs) == [[2], [2], [2]]  # CartPole's native vector env, whole
    # RLlib's timeout: a runner not done in time is left out of the results (last: its call goes on)
    slow_on_2 = functools.partial(_slow_on, 2)
    # runner 1 answers in milliseconds, well inside the timeout even on a busy machine; runner 2 not before it
    assert algo.workers.foreach_worker(slow_on_2, local_worker=False, timeout_seconds=5.0) == [1]


def _slow_on(index: int, worker: Any) -> int:
    if worker.worker_index == index:
        time.sleep(20)
    return int(worker.worker_index)


def test_auto_evaluation_duration_evaluates_episode_after_episode_while_the_iteration_trains(build) -> None:
    config = ppo(runners=0, min_time_s_per_iteration=2.0).evaluation(
        evaluation_interval=1, evaluation_duration="auto", evaluation_num_env_runners=2,
        evaluation_parallel_to_training=True,
    )  # fmt: skip
    algo = build(config)
    algo.train()  # the evaluation actors start in the first iteration, which their start may fill
    evaluation = algo.train()["evaluation"]
    # an untrained policy's CartPole episodes last well under a second: each actor runs many in 2 s
    assert evaluation["episodes_this_iter"] > 2 * 2
    assert len(evaluation["hist_stats"]["episode_reward"]) == evaluation["episodes_this_iter"]
    assert algo.evaluate()["episodes_this_iter"] >= 2  # outside train(): an episode on each actor
    with pytest.raises(ConfigError, match=r"evaluation_duration='auto' .* needs evaluation_parallel_to_training=True"):
        ppo(runners=0).evaluation(evaluation_interval=1, evaluation_duration="auto").build()


def test_evaluation_actors_late_past_the_sample_timeout_are_left_out_with_a_warning_and_restarted(build, caplog) -> None:
    config = ppo(runners=0, env="tests.toy_envs:SlowCartPole").evaluation(
        evaluation_duration=4, evaluation_num_env_runners=2, evaluation_sample_timeout_s=0.3,
        evaluation_config={"env_config": {"step_delay_s": 0.05}},  # an episode of 8+ steps takes 0.4 s or more
    )  # fmt: skip
    algo = build(config)
    with caplog.at_level("WARNING", logger="corral"):
        metrics = algo.evaluate()
    assert metrics["episodes_this_iter"] == 0
    assert "evaluation runners [1, 2] did not finish within evaluation_sample_timeout_s=0.3" in caplog.text
    group = algo._evaluation_runners()
    pids_before = group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    assert pids_before == []  # both are marked for restart, so nothing is sent to them
    group.replace_failed()
    assert group.num_restarts == 2 and len(group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)) == 2


def test_a_restarted_runner_that_does_not_answer_the_health_probe_in_time_has_failed_again(build, tmp_path, caplog) -> None:
    flag = tmp_path / "slow"
    config = ppo(
        env="tests.toy_envs:SlowCartPole", recreate_failed_env_runners=True, worker_health_probe_timeout_s=0.5,
        env_config={"slow_start_flag": str(flag), "start_delay_s": 5.0},
    )  # fmt: skip
    algo = build(config)
    group = algo.env_runner_group
    flag.touch()  # from now on, a runner takes 5 s to make its env
    group.foreach_env_runner(lambda r: os._exit(1), local_env_runner=False, remote_worker_ids=[1])
    with caplog.at_level("WARNING", logger="corral"):
        group.replace_failed()
    assert "env runner 1 (SlowCartPole) failed and will be replaced: no answer to a health probe within" in caplog.text
    assert group.healthy_remote_ids() == [2]


@pytest.mark.parametrize("cpus", [1, 2])
def test_auto_torch_threads_in_a_runner_are_the_cpus_it_reserved(build, cpus) -> None:
    algo = build(ppo(runners=1, num_torch_threads="auto", num_cpus_per_env_runner=cpus))
    import torch

    assert algo.env_runner_group.foreach_env_runner(lambda r: torch.get_num_threads(), local_env_runner=False) == [cpus]

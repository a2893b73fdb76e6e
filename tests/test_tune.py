"""Every corral algorithm is a Ray Tune trainable by name (Ray started here, on two CPUs)."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import pytest
import ray
from ray import tune

import corral
import corral.registry
import corral.tune
from corral import Algorithm, Callbacks
from corral.errors import ConfigError
from corral.plugins.ppo import PPO

MARKERS = "CORRAL_TUNE_TEST_MARKERS"
SMALL = {
    "train_batch_size": 256,
    "minibatch_size": 128,
    "num_epochs": 1,
    "num_envs_per_env_runner": 2,
    "log_to_tensorboard": False,
}


@pytest.fixture(scope="module", autouse=True)
def local_ray(tmp_path_factory):
    # Set before Ray starts, so that the trial processes see it.
    os.environ[MARKERS] = str(tmp_path_factory.mktemp("markers"))
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def space(**overrides):
    """A param space: PPO's whole config as a dict, small, with overrides (Tune search spaces allowed)."""
    return {**corral.get_config("PPO").environment("CartPole-v1").to_dict(), **SMALL, "seed": 0, **overrides}


def run_config(tmp_path: Path, name: str, **kwargs) -> tune.RunConfig:
    return tune.RunConfig(name=name, storage_path=str(tmp_path), verbose=0, **kwargs)


def test_grid_search_over_two_learning_rates_gives_two_trials(tmp_path) -> None:
    tuner = tune.Tuner(
        "PPO",
        param_space=space(lr=tune.grid_search([1e-3, 3e-4])),
        run_config=run_config(tmp_path, "grid", stop={"training_iteration": 2}),
    )
    results = tuner.fit()
    assert len(results) == 2 and not results.errors
    assert sorted(r.config["lr"] for r in results) == [3e-4, 1e-3]
    for r in results:
        assert r.metrics["training_iteration"] == 2
        assert r.metrics["num_env_steps_sampled"] > 0 and "episode_reward_mean" in r.metrics
    # each trial's corral results lie in its own folder, though to_dict() carries storage_path=None
    written = sorted(tmp_path.glob("grid/*/corral/PPO_CartPole-v1_*/result.json"))
    assert len(written) == 2 and len({path.parents[2] for path in written}) == 2
    assert not list(tmp_path.parent.glob("session_corral_results*/PPO_*"))  # where trial processes would default to


def test_a_builder_with_a_search_space_runs_through_tune_and_each_trial_checks_its_value(tmp_path) -> None:
    """RLlib's documented example: a search space in a builder, the config's to_dict() as the param space."""
    config = corral.get_config("PPO").environment("CartPole-v1").update_from_dict({**SMALL, "seed": 0})
    config.training(lr=tune.grid_search([1e-3, 3e-4]))
    results = tune.Tuner(
        "PPO", param_space=config.to_dict(), run_config=run_config(tmp_path, "builder", stop={"training_iteration": 1})
    ).fit()
    assert not results.errors and sorted(r.config["lr"] for r in results) == [3e-4, 1e-3]
    # a sampled value is checked when its trial starts: this one is never a valid learning rate
    config.training(lr=tune.uniform(-1.0, -0.5))
    failed = tune.Tuner(
        "PPO", param_space=config.to_dict(), run_config=run_config(tmp_path, "bad", stop={"training_iteration": 1})
    ).fit()
    assert len(failed.errors) == 1 and "lr=" in str(failed.errors[0]) and "greater than 0" in str(failed.errors[0])


def test_tune_checkpoints_are_corral_checkpoints(tmp_path) -> None:
    results = tune.Tuner(
        "PPO",
        param_space=space(),
        run_config=run_config(
            tmp_path, "ckpt", stop={"training_iteration": 2}, checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True)
        ),
    ).fit()
    (result,) = results
    algo = Algorithm.from_checkpoint(result.checkpoint.path)
    try:
        assert isinstance(algo, PPO) and algo.iteration == 2
    finally:
        algo.stop()


class FailOnceAtIteration3(Callbacks):
    """Raises in the third iteration the first time, as a crash mid-run would."""

    def on_train_result(self, *, result, **kwargs) -> None:
        marker = Path(os.environ[MARKERS]) / "crashed"
        if result["training_iteration"] == 3 and not marker.exists():
            marker.touch()
            raise RuntimeError("simulated crash in iteration 3")


def test_tuner_restore_resumes_at_the_checkpointed_iteration(tmp_path) -> None:
    config = space(callbacks_class="tests.test_tune:FailOnceAtIteration3")
    rc = run_config(
        tmp_path, "resume", stop={"training_iteration": 4}, checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1)
    )
    first = tune.Tuner("PPO", param_space=config, run_config=rc).fit()
    assert first.errors and (Path(os.environ[MARKERS]) / "crashed").exists()
    assert first[0].metrics["training_iteration"] == 2

    restored = tune.Tuner.restore(str(tmp_path / "resume"), trainable="PPO", resume_errored=True).fit()
    assert not restored.errors
    history = restored[0].metrics_dataframe["training_iteration"].tolist()
    assert history[-1] == 4 and 3 in history and history.count(1) == 1  # went on from 2, did not start over


class LocalPPO(PPO):
    """A 'third-party' algorithm, registered in-process only."""


def test_an_algorithm_registered_in_process_is_trainable_by_name(tmp_path) -> None:
    corral.register_algorithm("LocalPPO", LocalPPO)
    try:
        (result,) = tune.Tuner(
            "LocalPPO", param_space=space(), run_config=run_config(tmp_path, "local", stop={"training_iteration": 1})
        ).fit()
        assert result.error is None and result.metrics["training_iteration"] == 1
    finally:
        corral.registry.refresh()


class CountingPPO(PPO):
    """A script's own algorithm class, handed to Tune as the class (RLlib's algorithms are Trainables)."""

    def training_step(self):
        learner = super().training_step()
        self._counters["counting_ppo_steps"] += 1
        return learner


def test_an_algorithm_class_is_taken_by_tune_wherever_a_trainable_is(tmp_path) -> None:
    (result,) = tune.Tuner(
        CountingPPO, param_space=space(), run_config=run_config(tmp_path, "as_class", stop={"training_iteration": 2})
    ).fit()
    assert result.error is None and result.metrics["training_iteration"] == 2
    assert result.metrics["counting_ppo_steps"] == 2  # the subclass's own training_step ran
    tune.register_trainable("counting", CountingPPO)
    assert tune.registry.get_trainable_cls("counting").get_default_config().lr == PPO.get_default_config().lr


@pytest.mark.parametrize("key", ["num_env_steps_sampled_lifetime", "env_runners/episode_return_mean"])
def test_the_new_api_stack_s_stop_keys_stop_a_ray_tune_run(tmp_path, key: str) -> None:
    (result,) = tune.Tuner(  # Tune reads a stop key as it is named: a result that lacked it never stopped
        "PPO", param_space=space(), run_config=run_config(tmp_path, "new_stack", stop={key: 1})
    ).fit()
    assert result.error is None and result.metrics["training_iteration"] == 1


def test_a_stop_key_the_results_never_have_is_an_error_before_anything_starts(tmp_path) -> None:
    with pytest.raises(
        ConfigError, match=r"stop key 'episode_reward_meen' .*Did you mean 'episode_reward_mean'.*Results have: .*timesteps_total"
    ):
        corral.tune.Tuner("PPO", param_space=space(), run_config=run_config(tmp_path, "bad", stop={"episode_reward_meen": 400}))
    assert not (tmp_path / "bad").exists()
    corral.tune.check_stop({"evaluation/episode_reward_mean": 1, "timesteps_total": 10, "time_since_restore": 5})


def test_a_trial_reserves_a_bundle_per_remote_env_runner() -> None:
    request = corral.tune.trainable("PPO").default_resource_request({"num_env_runners": 2, "num_cpus_per_env_runner": 0.5})
    assert request.bundles == [{"CPU": 1.0}, {"CPU": 0.5}, {"CPU": 0.5}]  # Ray leaves out zero GPUs
    assert request.strategy == "PACK"


def test_the_algorithm_class_gives_the_same_request_for_a_tune_function_of_the_script_s_own() -> None:
    from corral.plugins.ppo import PPO

    asked = {"num_workers": 2, "train-iterations": 2}  # RLlib's older name, and a key of the script's own function
    request = PPO.default_resource_request(asked)
    assert request.bundles == corral.tune.trainable("PPO").default_resource_request(asked).bundles
    assert request.bundles == [{"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}]
    from_config = PPO.default_resource_request(corral.get_config("PPO").env_runners(num_env_runners=1))
    assert from_config.bundles == [{"CPU": 1.0}, {"CPU": 1.0}]


def test_a_trial_reserves_a_bundle_per_learner_actor() -> None:
    request = corral.tune.trainable("PPO").default_resource_request(
        {"num_env_runners": 1, "num_learner_workers": 2, "num_cpus_per_learner_worker": 2}
    )
    assert request.bundles == [{"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 2.0}, {"CPU": 2.0}]


def test_the_learner_s_cpus_and_the_placement_strategy_take_rllib_s_names() -> None:
    request = corral.tune.trainable("PPO").default_resource_request(
        {"num_env_runners": 1, "num_cpus_for_local_worker": 2, "placement_strategy": "SPREAD"}
    )
    assert request.bundles == [{"CPU": 2.0}, {"CPU": 1.0}] and request.strategy == "SPREAD"


def test_every_installed_algorithm_is_registered_with_tune() -> None:
    from ray.tune.registry import get_trainable_cls

    for name in ("PPO", "A2C", "DQN", "SAC"):
        assert get_trainable_cls(name).algorithm_class() is corral.get_algorithm(name)


def test_registrations_survive_a_restart_of_ray_in_the_same_process() -> None:
    from ray.tune.registry import ENV_CREATOR, _global_registry, get_trainable_cls

    corral.register_env("survives_a_restart", lambda config: gym.make("CartPole-v1"))
    ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    assert get_trainable_cls("PPO").algorithm_class() is PPO
    assert _global_registry.contains(ENV_CREATOR, "survives_a_restart")  # where the trials look env names up


def test_a_multi_agent_config_searches_per_policy_options_through_tune(tmp_path) -> None:
    """The config goes to the trials as a dict: the env, the mapping and each policy's spec by name."""
    config = (
        corral.get_config("PPO")
        .environment("corral.testing.envs:MultiAgentCartPole", env_config={"num_agents": 2})
        .multi_agent(
            policies={"p0": corral.PolicySpec(config={"lr": 1e-3}), "p1": corral.PolicySpec()},
            policy_mapping_fn="corral.core.contracts.multi_agent_config:policy_per_agent",
            policies_to_train=["p0"],
        )
    )
    param_space = {**config.to_dict(), **SMALL, "seed": 0}
    param_space["policies"]["p0"]["config"] = {"lr": tune.grid_search([1e-3, 1e-4])}
    tuner = tune.Tuner("PPO", param_space=param_space, run_config=run_config(tmp_path, "multi", stop={"training_iteration": 2}))
    results = tuner.fit()
    assert len(results) == 2 and not results.errors
    assert sorted(r.config["policies"]["p0"]["config"]["lr"] for r in results) == [1e-4, 1e-3]
    for r in results:
        assert set(r.metrics["policy_reward_mean"]) == {"p0", "p1"}
        assert set(r.metrics["info"]["learner"]) == {"p0"}  # only p0 learns, in every trial
        assert r.metrics["info"]["learner"]["p0"]["learner_stats"]["cur_lr"] == r.config["policies"]["p0"]["config"]["lr"]


def test_the_trainable_of_an_algorithm_gives_its_default_config() -> None:
    """RLlib's idiom: ``get_trainable_cls("PPO").get_default_config()``."""
    from ray.tune.registry import get_trainable_cls

    config = get_trainable_cls("PPO").get_default_config()
    assert type(config) is type(corral.get_config("PPO")) and config.algo_class is PPO


def test_corral_s_tuner_raises_when_a_trial_fails_and_names_it(tmp_path) -> None:
    """A script that runs corral.tune.Tuner exits non-zero when a trial raised; the ResultGrid comes with the error."""
    failing = space(lr=tune.grid_search([-1.0]))  # valid for Tune, refused by the trial's config
    with pytest.raises(corral.tune.TrialsFailedError, match=r"1 of 1 trials failed: .*lr=") as info:
        rc = run_config(tmp_path, "fails", stop={"training_iteration": 1})
        corral.tune.Tuner("PPO", param_space=failing, run_config=rc).fit()
    assert isinstance(info.value, tune.TuneError) and len(info.value.result_grid.errors) == 1
    results = corral.tune.Tuner(
        "PPO",
        param_space=failing,
        run_config=run_config(tmp_path, "returns", stop={"training_iteration": 1}),
        raise_on_failed_trial=False,
    ).fit()
    assert len(results.errors) == 1  # as ray.tune.Tuner does


def test_an_env_registered_with_corral_reaches_the_trials(tmp_path) -> None:
    """A trial is another process: the name reaches it through Tune's registry, with its creator."""
    corral.register_env("corral_registered_cartpole", lambda config: gym.make("CartPole-v1"))
    results = tune.Tuner(
        "PPO",
        param_space=space(env="corral_registered_cartpole"),
        run_config=run_config(tmp_path, "registered", stop={"training_iteration": 1}),
    ).fit()
    assert not results.errors and results[0].metrics["training_iteration"] == 1


def test_an_env_registered_with_ray_tune_is_known_to_corral(make_algo) -> None:
    """How nearly every RLlib script names its env: ``ray.tune.registry.register_env``."""
    from ray.tune.registry import register_env

    register_env("tune_registered_cartpole", lambda config: gym.make("CartPole-v1", max_episode_steps=config["steps"]))
    config = corral.get_config("PPO").environment("tune_registered_cartpole", env_config={"steps": 7})
    algo = make_algo(config.update_from_dict(SMALL))
    assert algo.train()["episode_len_mean"] <= 7

"""RLlib's config surface as its documentation uses it: the framework, log levels, and the config read as a mapping."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import torch

import corral
from corral import ConfigError


def test_framework_torch_is_accepted_as_rllib_writes_it() -> None:
    config = corral.get_config("PPO").framework("torch").environment("CartPole-v1").training(lr=1e-3)
    assert config["framework"] == "torch" and config.lr == 1e-3


@pytest.mark.parametrize("name", ["tf", "tf2", "tfe"])
def test_tensorflow_configs_run_on_torch_with_a_warning(name: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="corral"):
        config = corral.get_config("PPO").framework(name, eager_tracing=True)
        corral.get_config("DQN").update_from_dict({"framework": name, "lr": 5e-4})
    warnings = [r.getMessage() for r in caplog.records]
    assert any(f"framework={name!r}: corral runs this config on torch" in w for w in warnings)
    assert any("eager_tracing is a TensorFlow option; corral runs on torch and ignores it" in w for w in warnings)
    assert config["framework"] == "torch"


def test_environment_keeps_the_env_unless_given_and_env_none_clears_it_as_in_rllib() -> None:
    config = corral.get_config("PPO").environment("CartPole-v1")
    assert config.environment(env_config={"size": 3}).env == "CartPole-v1"
    assert config.environment(env=None).env is None  # RLlib's server scripts: the episodes come from clients


def test_an_unknown_framework_option_or_framework_is_refused() -> None:
    with pytest.raises(ConfigError, match="framework='jax' is not supported"):
        corral.get_config("PPO").framework("jax")
    with pytest.raises(ConfigError, match="has no option 'eager_tracin'"):
        corral.get_config("PPO").framework("tf2", eager_tracin=True)


@pytest.mark.parametrize(("given", "kept"), [("WARN", "WARNING"), ("info", "INFO"), ("DEBUG", "DEBUG")])
def test_rllib_s_log_level_names_are_accepted(given: str, kept: str) -> None:
    assert corral.get_config("PPO").debugging(log_level=given).log_level == kept


def test_the_config_reads_as_a_mapping() -> None:
    config = corral.get_config("PPO").training(lr=0.01, lambda_=0.9)
    assert config["lr"] == 0.01 and config["lambda"] == 0.9 and config["lambda_"] == 0.9
    assert config.get("lr") == 0.01 and config.get("no_such_option", 7) == 7
    assert "lr" in config and "num_workers" in config and "no_such_option" not in config
    assert "train_batch_size" in list(config.keys()) and len(config.keys()) == len(config.values()) == len(config.items())
    assert dict(config.items())["lr"] == 0.01
    with pytest.raises(KeyError, match=r"no option 'lrr'.*lr"):
        config["lrr"]


def test_the_cli_takes_rllib_s_framework_flags(run_cli: Any) -> None:
    stop = '{"training_iteration": 1}'
    for flags in (["--framework", "torch"], ["--torch"], ["--framework", "tf2", "--trace"]):
        config = '{"train_batch_size": 64, "minibatch_size": 64, "num_envs_per_env_runner": 2}'
        proc = run_cli("train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", stop, "--config", config, *flags)
        assert proc.returncode == 0, proc.stderr
        if "tf2" in flags:
            assert "runs this config on torch" in proc.stderr
            assert "eager_tracing is a TensorFlow option; corral runs on torch and ignores it" in proc.stderr


@pytest.mark.parametrize(
    ("rllib_key", "corral_key"),
    [
        ("sampler_results/episode_reward_mean", "episode_reward_mean"),
        ("env_runners/episode_return_mean", "episode_reward_mean"),
        ("env_runners/episode_len_mean", "episode_len_mean"),
        ("evaluation/env_runners/episode_return_mean", "evaluation/episode_reward_mean"),
        ("evaluation/sampler_results/episode_reward_mean", "evaluation/episode_reward_mean"),
        ("num_env_steps_sampled_lifetime", "num_env_steps_sampled"),
        ("episode_reward_mean", "episode_reward_mean"),
    ],
)
def test_rllib_s_result_keys_of_every_2x_layout_name_corral_s(rllib_key: str, corral_key: str) -> None:
    from corral.core.results import corral_result_key

    assert corral_result_key(rllib_key) == corral_key


def test_a_result_holds_its_episode_stats_where_each_ray_2x_reads_them_and_its_files_hold_them_once(make_algo) -> None:
    config = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=256, minibatch_size=128)
    algo = make_algo(config.evaluation(evaluation_interval=1, evaluation_duration=2))
    result = algo.train()
    for metrics in (result, result["evaluation"]):
        assert metrics["sampler_results"]["episode_reward_mean"] == metrics["episode_reward_mean"]  # Ray 2.5-2.9
        runners = metrics["env_runners"]  # Ray 2.10 on, also under the new API stack's names
        assert runners["episode_return_mean"] == runners["episode_reward_mean"] == metrics["episode_reward_mean"]
        assert runners["num_episodes"] == metrics["episodes_this_iter"] > 0
    assert result["config"] == algo.config.to_dict()
    assert result["num_env_steps_sampled_lifetime"] == result["num_env_steps_sampled"] > 0  # Ray 2.10+'s stop key
    from corral.rllib.utils import metrics as names  # Ray 2.10+'s names of those keys

    evaluated = result[names.EVALUATION_RESULTS][names.ENV_RUNNER_RESULTS]
    assert evaluated[names.EPISODE_RETURN_MEAN] == result["evaluation"]["episode_reward_mean"]
    runners = result[names.ENV_RUNNER_RESULTS]
    assert runners[names.EPISODE_RETURN_MIN] <= runners[names.EPISODE_RETURN_MEAN] <= runners[names.EPISODE_RETURN_MAX]
    assert runners[names.EPISODE_LEN_MEAN] == result["episode_len_mean"] and runners[names.NUM_EPISODES] > 0
    assert result[names.NUM_ENV_STEPS_SAMPLED_LIFETIME] == result["num_env_steps_sampled"]
    written = json.loads((Path(algo.logdir) / "result.json").read_text().splitlines()[0])
    assert not {"config", "sampler_results", "env_runners", "num_env_steps_sampled_lifetime"} & {
        *written,
        *written["evaluation"],
    }
    assert written["episode_reward_mean"] == result["episode_reward_mean"]


def test_a_yaml_file_with_rllib_s_stop_key_and_renamed_options_runs(run_cli: Any, tmp_path: Any) -> None:
    (tmp_path / "ppo.yaml").write_text(
        "cartpole-ppo:\n"
        "  env: CartPole-v1\n"
        "  run: PPO\n"
        "  stop:\n"
        "    env_runners/episode_return_mean: 1\n"
        "    timesteps_total: 2000\n"
        "  config:\n"
        "    framework: tf2\n"
        "    eager_tracing: true\n"
        "    num_envs_per_worker: 2\n"
        "    train_batch_size: 64\n"
        "    sgd_minibatch_size: 64\n"
        "    metrics_smoothing_episodes: 5\n"
        "    timesteps_per_iteration: 0\n"
        "    seed: 0\n"  # unseeded, both envs' first episodes could outlast the first 64 steps
    )
    proc = run_cli("train", "-f", str(tmp_path / "ppo.yaml"))
    assert proc.returncode == 0, proc.stderr
    # a 1-step episode mean is reached at once: the alias was read as corral's episode_reward_mean
    assert "iter    1" in proc.stdout and "iter    2" not in proc.stdout, proc.stdout


def test_rllib_s_optimization_group_and_a_partial_replay_buffer_config_merge_into_the_defaults() -> None:
    sac = corral.get_config("SAC").update_from_dict(
        {
            "optimization": {"actor_learning_rate": 1e-3, "critic_learning_rate": 2e-3, "entropy_learning_rate": 3e-3},
            "replay_buffer_config": {"type": "MultiAgentPrioritizedReplayBuffer", "learning_starts": 500},
        }
    )
    assert (sac.actor_lr, sac.critic_lr, sac.alpha_lr) == (1e-3, 2e-3, 3e-3)
    assert sac.learning_starts == 500
    assert sac.replay_buffer_config == {"type": "MultiAgentPrioritizedReplayBuffer", "capacity": 1_000_000}
    sac.environment("Pendulum-v1").validate()  # the merged buffer config is complete
    dqn = corral.get_config("DQN").training(replay_buffer_config={"capacity": 5000})
    assert dqn.replay_buffer_config["capacity"] == 5000 and dqn.replay_buffer_config["type"] == "ReplayBuffer"
    with pytest.raises(ConfigError, match=r"has no option 'optimization\.actor_learning_rate'"):
        corral.get_config("PPO").update_from_dict({"optimization": {"actor_learning_rate": 1e-3}})
    cql = corral.get_config("CQL").training(optimization_config={"actor_learning_rate": 4e-4})  # Ray 2.x's name
    assert cql.actor_lr == 4e-4


def test_train_ends_with_a_checkpoint_and_the_documented_evaluate_command_runs_it(run_cli: Any) -> None:
    small = '{"train_batch_size": 64, "minibatch_size": 64, "num_envs_per_env_runner": 2}'
    trained = run_cli("train", "--run", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}', "--config", small)
    assert trained.returncode == 0, trained.stderr
    (checkpoint,) = [line.split(": ", 1)[1] for line in trained.stdout.splitlines() if line.startswith("last checkpoint: ")]
    assert f"corral evaluate {checkpoint}" in trained.stdout
    evaluated = run_cli("evaluate", checkpoint, "--run", "PPO", "--env", "CartPole-v1", "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stderr
    assert evaluated.stdout.startswith("2 episodes: reward mean")
    wrong = run_cli("evaluate", checkpoint, "--run", "DQN")
    assert wrong.returncode != 0 and "does not match the checkpoint, which holds a PPO" in wrong.stderr
    one = ("--stop", '{"training_iteration": 1}', "--config", small)
    skipped = run_cli("train", "--algo", "PPO", "--env", "CartPole-v1", *one, "--no-checkpoint")
    assert skipped.returncode == 0 and "no checkpoint was saved" in skipped.stdout


def test_simpleq_is_rllib_s_plain_dqn() -> None:
    # one-step targets, one head, hard copies; that it learns CartPole with these defaults is RLlib's own
    # cartpole-simpleq.yaml's test (tests/compat/test_rllib_tuned_examples.py: 150 within 50k env steps)
    config = corral.get_config("SimpleQ")
    assert (config.double_q, config.dueling, config.n_step, config.tau) == (False, False, 1, 1.0)
    assert corral.get_algorithm("simpleq").name == "SimpleQ"


def test_rllib_options_corral_does_not_have_say_why_and_what_to_use() -> None:
    with pytest.raises(ConfigError, match=r"'simple_optimizer' is an RLlib option that corral does not have: each"):
        corral.get_config("PPO").update_from_dict({"simple_optimizer": True})
    with pytest.raises(ConfigError, match="'sample_async' is an RLlib option that corral does not have: IMPALA"):
        corral.get_config("PPO").env_runners(sample_async=True)


def test_an_older_rllib_s_attribute_names_read_and_set_the_option_they_stand_for() -> None:
    config = corral.get_config("PPO").env_runners(num_envs_per_env_runner=3)
    assert config.num_envs_per_worker == 3  # Ray 2.9's scripts read this name
    config.num_rollout_workers = 2
    assert config.num_env_runners == 2 and config.num_rollout_workers == 2
    with pytest.raises(AttributeError):
        _ = corral.get_config("SAC").num_rollout_workerz
    with pytest.raises(AttributeError):
        _ = corral.get_config("PPO").Q_model  # stands for SAC's q_model_config, which PPO has not
    with pytest.raises(ConfigError, match=r"no option 'Q_model'"):
        corral.get_config("PPO").Q_model = {}


def test_did_you_mean_suggests_only_a_name_that_is_close() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'train_batch_size'"):
        corral.get_config("PPO").training(trian_batch_size=64)
    with pytest.raises(ConfigError) as far:
        corral.get_config("PPO").update_from_dict({"optimisation_magic": 1})
    assert "Did you mean" not in str(far.value) and "--help-config" in str(far.value)


def test_without_training_intensity_sac_makes_one_update_per_env_step_whatever_its_batch_as_rllib_does(make_algo) -> None:
    config = corral.get_config("SAC").environment("Pendulum-v1").debugging(seed=0)
    config.update_from_dict({"train_batch_size": 32, "learning_starts": 0, "min_sample_timesteps_per_iteration": 200})
    algo = make_algo(config.training(model={"fcnet_hiddens": [16]}))
    algo.train()
    assert algo.counters["num_env_steps_sampled"] >= 200
    assert algo.counters["num_env_steps_trained"] == 32 * algo.counters["num_env_steps_sampled"]  # one batch of 32 per step


def test_the_native_replay_ratio_counts_every_sub_environment_s_step_as_rllib_does(make_algo) -> None:
    """DQN on 4 sub-environments with fragments of 2: one update per 8 env steps, RLlib's one per sample round."""
    config = corral.get_config("DQN").environment("CartPole-v1").debugging(seed=0)
    config.update_from_dict(
        {"training_intensity": None, "num_envs_per_env_runner": 4, "rollout_fragment_length": 2, "learning_starts": 0}
    )
    algo = make_algo(config.reporting(min_sample_timesteps_per_iteration=400))
    algo.train()
    updates = algo.counters["num_env_steps_trained"] / config.train_batch_size
    assert abs(updates - algo.counters["num_env_steps_sampled"] / 8) <= 1


def test_dqn_s_hiddens_are_q_head_layers_after_the_network_in_both_dueling_streams(make_algo) -> None:
    """RLlib's meaning: a file with a one-layer 64-unit network still gets a hidden Q head, not a linear Q-function."""
    from torch import nn

    config = corral.get_config("DQN").environment("CartPole-v1").training(model={"fcnet_hiddens": [64]})
    model = make_algo(config).get_policy().model
    for head in (model.advantage_head, model.value_head):
        linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
        assert [(m.in_features, m.out_features) for m in linears[:1]] == [(64, 128)] and len(linears) == 2
    flat = make_algo(config.copy().training(hiddens=[], dueling=False)).get_policy().model
    assert isinstance(flat.advantage_head, nn.Linear) and flat.value_head is None
    with pytest.raises(ConfigError, match="hiddens=0 is invalid: Input should be greater than or equal to 1"):
        corral.get_config("DQN").training(hiddens=[0])


def test_a_partial_model_dict_keeps_the_algorithm_s_other_model_defaults() -> None:
    config = corral.get_config("DQN").training(model={"fcnet_hiddens": [64]})
    assert config.model.fcnet_hiddens == [64] and config.model.fcnet_activation == "relu"  # DQN's, not the catalog's tanh


def test_sac_s_q_model_and_policy_model_configs_shape_the_critics_and_the_actor(make_algo) -> None:
    from torch import nn

    config = corral.get_config("SAC").environment("Pendulum-v1")
    config.update_from_dict({"Q_model": {"fcnet_hiddens": [64]}, "policy_model_config": {"fcnet_hiddens": [32, 32]}})
    config.update_from_dict({"Q_model": {"fcnet_activation": "tanh"}})  # merged into the first
    assert config.to_dict()["q_model_config"] == {"fcnet_hiddens": [64], "fcnet_activation": "tanh"}
    model = make_algo(config).get_policy().model
    assert [layer.weight.shape[-1] for layer in model.critics.hidden] == [64]
    assert [m.out_features for m in model.actor.modules() if isinstance(m, nn.Linear)] == [32, 32, 2]
    with pytest.raises(ConfigError, match=r"q_model_config has no model option 'fcnet_hiden'\. Did you mean 'fcnet_hiddens'"):
        corral.get_config("SAC").training(q_model_config={"fcnet_hiden": [64]})


def test_lr_and_entropy_coeff_take_rllib_s_piecewise_schedules(make_algo) -> None:
    config = corral.get_config("PPO").environment("CartPole-v1").debugging(seed=0)
    config.training(lr=[[0, 1e-3], [1000, 1e-5]], entropy_coeff=[[0, 0.02], [1000, 0.0]])
    config.training(train_batch_size=500, minibatch_size=250)
    assert config.lr_schedule == [(0, 1e-3), (1000, 1e-5)] and config.lr == 1e-3
    assert config.entropy_coeff_schedule == [(0, 0.02), (1000, 0.0)]
    algo = make_algo(config)
    algo.train()
    policy = algo.get_policy()
    t = policy.global_timestep
    assert t >= 500
    assert policy.scheduled("lr") == pytest.approx(1e-3 + (1e-5 - 1e-3) * min(t, 1000) / 1000)
    assert policy.scheduled("entropy_coeff") == pytest.approx(0.02 * max(0, 1000 - t) / 1000)
    stats = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats["cur_lr"] == pytest.approx(1e-5)  # past the last point
    with pytest.raises(ConfigError, match=r"the value -0\.1 is not a valid entropy_coeff"):
        corral.get_config("PPO").training(entropy_coeff=[[0, -0.1]])


def test_tune_search_spaces_are_accepted_in_any_builder_and_carried_by_to_dict() -> None:
    from ray import tune

    config = corral.get_config("PPO").environment("CartPole-v1").training(lr=tune.grid_search([0.01, 0.001]))
    config.env_runners(num_envs_per_env_runner=tune.choice([2, 4])).training(gamma=tune.uniform(0.9, 0.99))
    space = config.to_dict()
    assert space["lr"] == {"grid_search": [0.01, 0.001]} and config["lr"] == space["lr"]
    assert type(space["gamma"]).__name__ == "Float" and type(space["num_envs_per_env_runner"]).__name__ == "Categorical"
    assert set(config.search_space) == {"lr", "gamma", "num_envs_per_env_runner"}
    with pytest.raises(ConfigError, match=r"gamma, lr, num_envs_per_env_runner hold a Tune search space.*tune\.Tuner"):
        config.build()
    config.training(lr=0.01)  # a value replaces the search space
    assert "lr" not in config.search_space and config.to_dict()["lr"] == 0.01


def test_a_grid_or_choice_value_no_trial_could_use_is_refused_at_once() -> None:
    from ray import tune

    with pytest.raises(ConfigError, match="lr: the Tune search space's value -1 is invalid"):
        corral.get_config("PPO").training(lr=tune.grid_search([0.01, -1]))
    with pytest.raises(ConfigError, match="num_epochs: the Tune search space's value 0 is invalid"):
        corral.get_config("PPO").update_from_dict({"num_epochs": {"grid_search": [1, 0]}})


@pytest.mark.parametrize("clip_by", ["global_norm", "norm", "value"])
def test_grad_clip_by_clips_as_rllib_s_option_says(make_algo, clip_by: str) -> None:

    config = corral.get_config("PPO").environment("CartPole-v1").training(grad_clip=0.5, grad_clip_by=clip_by)
    policy = make_algo(config).get_policy()
    params = [p for group in policy.optimizer.param_groups for p in group["params"]]
    generator = torch.Generator().manual_seed(0)
    for p in params:
        p.grad = 3.0 * torch.randn(p.shape, generator=generator)
    before = [p.grad.clone() for p in params]
    (norm,) = policy.clip_gradients()
    assert norm == pytest.approx(torch.linalg.vector_norm(torch.stack([g.norm() for g in before])).item(), rel=1e-5)
    after = [p.grad for p in params]
    if clip_by == "global_norm":  # one factor for all, the joint norm brought to 0.5
        assert torch.linalg.vector_norm(torch.stack([g.norm() for g in after])).item() == pytest.approx(0.5, rel=1e-4)
        assert all(torch.allclose(a * (norm / 0.5), b, rtol=1e-3) for a, b in zip(after, before, strict=True))
    elif clip_by == "norm":  # each tensor on its own
        for a, b in zip(after, before, strict=True):
            assert a.norm().item() == pytest.approx(min(0.5, b.norm().item()), rel=1e-4)
    else:  # each element
        assert all(torch.equal(a, b.clamp(-0.5, 0.5)) for a, b in zip(after, before, strict=True))


def test_min_train_timesteps_per_iteration_repeats_training_steps_until_trained(make_algo) -> None:
    config = corral.get_config("PPO").environment("CartPole-v1").debugging(seed=0)
    config.update_from_dict({"train_batch_size": 64, "minibatch_size": 32, "min_train_timesteps_per_iteration": 200})
    algo = make_algo(config)
    assert algo.train()["num_env_steps_trained"] >= 200


@pytest.mark.parametrize(
    "checkpointing",
    [
        "  local_dir: {results}\n  checkpoint_freq: 1\n  keep_checkpoints_num: 2\n",  # Ray 1.x
        "  storage_path: {results}\n  checkpoint_config:\n    checkpoint_frequency: 1\n    num_to_keep: 2\n",  # Ray 2.x
    ],
    ids=["ray1", "ray2"],
)
def test_a_yaml_file_s_checkpoint_and_storage_keys_are_obeyed(run_cli: Any, tmp_path: Any, checkpointing: str) -> None:
    results = tmp_path / "results"
    (tmp_path / "ppo.yaml").write_text(
        "cartpole-ppo:\n  env: CartPole-v1\n  run: PPO\n  stop:\n    training_iteration: 4\n"
        + checkpointing.format(results=results)
        + "  config:\n    train_batch_size: 64\n    minibatch_size: 32\n"
    )
    proc = run_cli("train", "-f", str(tmp_path / "ppo.yaml"))
    assert proc.returncode == 0, proc.stderr
    (experiment,) = results.iterdir()
    kept = sorted(p.name for p in experiment.iterdir() if p.name.startswith("checkpoint_"))
    assert kept == ["checkpoint_000003", "checkpoint_000004"]  # every iteration saved, the newest two kept


def test_an_exploration_given_by_its_class_path_is_built(make_algo) -> None:
    """RLlib's exploration_config={'type': 'pkg.mod:Class'}: a custom exploration needs no registration."""
    from corral.core.learning.exploration import EpsilonGreedy

    config = corral.get_config("DQN").environment("CartPole-v1")
    config.exploration(exploration_config={"type": "corral.core.learning.exploration:EpsilonGreedy", "final_epsilon": 0.1})
    exploration = make_algo(config).get_policy().exploration
    assert type(exploration) is EpsilonGreedy and exploration.get_info(10**9)["cur_epsilon"] == pytest.approx(0.1)
    missing = config.copy().exploration(exploration_config={"type": "corral.core.learning.exploration:Nothing"})
    with pytest.raises(ConfigError, match=r"exploration_config type: module 'corral\.core\.learning\.exploration' has no"):
        missing.build()


@pytest.mark.parametrize(
    "given, expected_class, expected",
    [
        ({"type": "sgd", "momentum": 0.9}, "SGD", {"momentum": 0.9}),
        ({"type": "AdamW", "weight_decay": 0.1, "betas": [0.8, 0.9]}, "AdamW", {"weight_decay": 0.1, "betas": (0.8, 0.9)}),
        ({"eps": 1e-3}, "FusedAdam", {"eps": 1e-3}),  # no type: PPO's Adam with another eps
        ({"foreach": True}, "Adam", {"foreach": True, "eps": 1e-5}),  # an option only torch.optim.Adam has
    ],
)
def test_the_optimizer_option_builds_the_torch_optimizer_it_names(make_algo, given, expected_class, expected) -> None:
    config = corral.get_config("PPO").environment("CartPole-v1").training(optimizer=given, lr=0.01)
    optimizer = make_algo(config).get_policy().optimizer
    assert type(optimizer).__name__ == expected_class
    assert optimizer.defaults["lr"] == 0.01 and {k: optimizer.defaults[k] for k in expected} == expected


def test_a_partial_optimizer_dict_merges_unless_it_names_another_type() -> None:
    config = corral.get_config("A2C")
    assert config.optimizer == {"type": "rmsprop", "alpha": 0.99, "eps": 1e-5}
    assert config.copy().training(optimizer={"eps": 1e-3}).optimizer == {"type": "rmsprop", "alpha": 0.99, "eps": 1e-3}
    assert config.copy().update_from_dict({"optimizer": "RMSprop"}).optimizer["alpha"] == 0.99
    assert config.copy().training(optimizer="adam").optimizer == {"type": "adam"}  # RMSprop's alpha does not fit Adam
    assert type(config).from_dict(config.to_dict()).optimizer == config.optimizer


@pytest.mark.parametrize(
    "given, message",
    [
        ({"type": "lion"}, "optimizer type 'lion' is not one of adam, adamw"),
        ({"lr": 0.1}, r"the optimizer's learning rate is the lr option \(training\(lr=...\)\)"),
        ({"type": "sgd", "eps": 1e-5}, "torch.optim.SGD takes no argument 'eps'; it takes dampening"),
    ],
)
def test_a_bad_optimizer_is_refused_naming_what_would_be_right(given, message) -> None:
    with pytest.raises(ConfigError, match=message):
        corral.get_config("PPO").training(optimizer=given)


def test_sac_s_one_optimizer_keeps_each_network_s_learning_rate(make_algo) -> None:
    config = corral.get_config("SAC").environment("Pendulum-v1").training(optimizer={"type": "rmsprop"}, actor_lr=1e-4)
    optimizer = make_algo(config).get_policy().optimizer
    assert isinstance(optimizer, torch.optim.RMSprop)
    assert {group["name"]: group["lr"] for group in optimizer.param_groups} == {"critics": 3e-4, "actor": 1e-4, "alpha": 3e-4}


class _EnvWithoutSpaces(gym.Env):
    """An env that declares no spaces: RLlib users give them in the config."""

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        self.t = 0
        return np.zeros(2, "float32"), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        return np.full(2, self.t / 8, "float32"), float(action), self.t >= 8, False, {}


def test_observation_and_action_space_options_give_an_env_its_spaces(make_algo) -> None:
    obs_space, act_space = gym.spaces.Box(-1.0, 1.0, (2,)), gym.spaces.Discrete(3)
    config = corral.get_config("PPO").environment(_EnvWithoutSpaces, observation_space=obs_space, action_space=act_space)
    config.training(train_batch_size=64, minibatch_size=32, num_epochs=1).env_runners(num_envs_per_env_runner=2)
    algo = make_algo(config)
    assert algo.train()["episodes_this_iter"] == 8  # 64 steps of 8-step episodes
    assert algo.get_policy().observation_space == obs_space and algo.get_policy().action_space == act_space
    restored = type(config).from_dict(json.loads(json.dumps(config.to_dict())))  # through JSON, as in a checkpoint
    assert restored.observation_space == obs_space and restored.action_space == act_space
    with pytest.raises(ConfigError, match="observation_space must be a gymnasium space, its JSON form"):
        corral.get_config("PPO").environment(observation_space=[2])


def test_a_space_override_that_the_env_s_observations_do_not_fit_is_caught_at_the_first_step(make_algo) -> None:
    config = corral.get_config("PPO").environment("CartPole-v1", observation_space=gym.spaces.Box(-1.0, 1.0, (4,)))
    with pytest.raises(corral.EnvError, match="observation"):
        make_algo(config.training(train_batch_size=512)).train()  # CartPole's velocities leave [-1, 1]
    with pytest.raises(ConfigError, match="set vectorize_mode='sync' or 'auto'"):
        config.env_runners(vectorize_mode="native").validate()


def test_log_sys_usage_reports_the_machine_s_cpu_and_memory_use_as_rllib_s_perf(make_algo) -> None:
    config = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=256, minibatch_size=128)
    perf = make_algo(config).train()["perf"]
    assert set(perf) == {"cpu_util_percent", "ram_util_percent"}
    assert 0 < perf["cpu_util_percent"] <= 100 and 0 < perf["ram_util_percent"] < 100  # training used CPU; RAM is in use
    assert "perf" not in make_algo(config.copy().debugging(log_sys_usage=False)).train()


def test_system_usage_reads_busy_and_total_ticks_and_available_memory(tmp_path) -> None:
    from corral.core.sampling.system_usage import SystemUsage

    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 250 kB\n")
    (tmp_path / "stat").write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n")
    usage = SystemUsage(tmp_path)
    (tmp_path / "stat").write_text("cpu  130 0 120 740 110 0 0 0 0 0\n")  # 50 busy of 100 ticks since
    assert usage.perf() == {"cpu_util_percent": 50.0, "ram_util_percent": 75.0}
    assert SystemUsage(tmp_path / "absent").perf() == {}


class ListLogger:
    """A result logger with Ray Tune's interface, keeping what it is given."""

    made: ClassVar[list[tuple[dict, str]]] = []
    results: ClassVar[list[dict]] = []
    closed: ClassVar[bool] = False

    def __init__(self, config: dict, logdir: str) -> None:
        ListLogger.made.append((config, logdir))

    def on_result(self, result: dict) -> None:
        ListLogger.results.append(result)

    def close(self) -> None:
        ListLogger.closed = True


def test_logger_config_s_type_replaces_corral_s_result_files_and_its_logdir_is_the_experiment_folder(make_algo, tmp_path):
    ListLogger.made, ListLogger.results, ListLogger.closed = [], [], False
    config = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=256, minibatch_size=128)
    folder = tmp_path / "mine"
    config.debugging(logger_config={"type": f"{__name__}:ListLogger", "logdir": str(folder)})
    algo = make_algo(config)
    algo.train()
    algo.train()
    checkpoint = algo.save()
    algo.stop()
    assert [r["training_iteration"] for r in ListLogger.results] == [1, 2] and ListLogger.closed
    assert ListLogger.made[0][1] == str(folder) and ListLogger.made[0][0]["train_batch_size"] == 256
    assert sorted(p.name for p in folder.iterdir()) == [Path(checkpoint).name]  # no result.json, progress.csv
    assert config.to_dict()["logger_config"]["type"] == f"{__name__}:ListLogger"


@pytest.mark.parametrize("noop", ["NoopLogger", "ray.tune.logger.NoopLogger"])
def test_a_noop_logger_writes_no_result_files(make_algo, tmp_path, noop) -> None:
    config = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=256, minibatch_size=128)
    algo = make_algo(config.debugging(logger_config={"type": noop, "logdir": str(tmp_path / "quiet")}))
    algo.train()
    assert list((tmp_path / "quiet").iterdir()) == []


def test_rllib_s_logger_creator_makes_the_logger_and_names_the_folder(make_algo, tmp_path) -> None:
    class Recorder:
        def __init__(self, config: dict) -> None:
            self.logdir, self.results = str(tmp_path / "created"), []

        def on_result(self, result: dict) -> None:
            self.results.append(result["training_iteration"])

    made: list[Recorder] = []
    config = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=256, minibatch_size=128)
    algo = config.build(logger_creator=lambda config_dict: made.append(Recorder(config_dict)) or made[-1])
    algo.train()
    assert made[0].results == [1] and algo.logdir == tmp_path / "created"
    algo.stop()
    with pytest.raises(ConfigError, match=r"logger_config type .* is not a result logger"):
        corral.get_config("PPO").debugging(logger_config={"type": "json:dumps"})


def test_rllib_options_whose_value_corral_always_has_are_accepted_and_any_other_value_says_why(caplog) -> None:
    with caplog.at_level("INFO", logger="corral"):
        config = corral.get_config("IMPALA").update_from_dict({"soft_horizon": False, "vtrace_drop_last_ts": False})
    assert "soft_horizon=False: corral always does this (episodes end when the env" in caplog.text
    assert config.to_dict() == corral.get_config("IMPALA").to_dict()
    with pytest.raises(ConfigError, match=r"soft_horizon=True is not what corral does: .*set soft_horizon=False"):
        corral.get_config("PPO").update_from_dict({"soft_horizon": True})
    with pytest.raises(ConfigError, match="vtrace_drop_last_ts=1 is not what corral does"):
        corral.get_config("IMPALA").update_from_dict({"vtrace_drop_last_ts": 1})
    # Ray 2.10's custom_eval example passes its asynchronous-evaluation switches off
    with caplog.at_level("INFO", logger="corral"):
        corral.get_config("PPO").evaluation(enable_async_evaluation=False, custom_async_evaluation_function=None)
    assert "custom_async_evaluation_function=None: corral always does this (evaluation is synchronous" in caplog.text
    with pytest.raises(ConfigError, match=r"enable_async_evaluation=True is not what corral does: .*parallel_to_training"):
        corral.get_config("PPO").evaluation(enable_async_evaluation=True)


def test_rllib_s_env_runner_classes_are_corral_s_own_and_a_user_s_is_refused(caplog) -> None:
    from corral.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
    from corral.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    with caplog.at_level("INFO", logger="corral"):
        for cls in (SingleAgentEnvRunner, MultiAgentEnvRunner, None):
            corral.get_config("PPO").env_runners(env_runner_cls=cls)
    assert "corral picks its single- or multi-agent env runner by the env" in caplog.text

    class MyRunner(SingleAgentEnvRunner):
        pass

    with pytest.raises(ConfigError, match=r"env_runner_cls=.*MyRunner.*corral samples with its own env runners"):
        corral.get_config("PPO").env_runners(env_runner_cls=MyRunner)


def test_horizon_cuts_every_episode_as_a_truncation(make_algo) -> None:
    config = corral.get_config("PPO").environment("CartPole-v1").env_runners(horizon=20).debugging(seed=0)
    config.training(train_batch_size=400, minibatch_size=200, num_epochs=1)
    result = make_algo(config).train()
    assert result["episode_len_mean"] <= 20 and max(result["hist_stats"]["episode_lengths"]) == 20
    with pytest.raises(ConfigError, match="horizon change each sub-environment"):
        config.copy().env_runners(vectorize_mode="native").validate()


def test_ray_2_9_s_resources_sets_the_env_runners_resources_and_other_groups_stay_refused() -> None:
    config = corral.get_config("PPO").resources(
        num_gpus=0, num_cpus_per_worker=2, num_gpus_per_worker=0, custom_resources_per_worker={"x": 1}
    )
    assert (config.num_cpus_per_env_runner, config.num_gpus_per_env_runner) == (2, 0)
    assert config.custom_resources_per_env_runner == {"x": 1}
    with pytest.raises(ConfigError, match=r"'lr' is set with \.training\(\), not \.resources\(\)"):
        corral.get_config("PPO").resources(lr=0.1)

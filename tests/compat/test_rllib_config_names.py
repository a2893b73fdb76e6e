"""RLlib's config calls and names of every 2.x era: answered for what they mean, never a crash or a silent no-op.

Experimental flags and API-stack switches are said at INFO where they ask for
what corral does and in a warning where corral lacks what they ask for (an
error where going on would change what is learned); ``is_multi_agent`` reads
as RLlib's method and as its property; a base ``AlgorithmConfig`` with
``algo_class`` builds that algorithm; a config object is an ``evaluation_config``;
RLlib's model keys for nets corral does not have yet say so.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import pytest
import torch
from torch import nn

import corral
from corral import AlgorithmConfig, ConfigError
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPO, PPOConfig
from tests.conftest import SMALL_PPO
from tests.toy_envs import ImageEnv

# (flag, a value asking for what corral does, another value, whether that other value is refused)
FLAGS = [
    ("_enable_new_api_stack", True, None, False),
    ("_enable_rl_module_api", True, None, False),
    ("_enable_learner_api", False, None, False),
    ("enable_rl_module_and_learner", True, None, False),
    ("enable_env_runner_and_connector_v2", False, None, False),
    ("_disable_execution_plan_api", True, False, False),
    ("_disable_preprocessor_api", False, True, False),
    ("_disable_action_flattening", True, None, False),
    ("_disable_initialize_loss_from_dummy_batch", True, None, False),
    ("_tf_policy_handles_more_than_one_loss", True, None, False),
    ("_validate_config", True, False, False),
    ("_use_msgpack_checkpoints", True, None, False),
    ("_torch_grad_scaler_class", None, nn.Module, False),
    ("_torch_lr_scheduler_classes", None, [nn.Module], True),
]


def records(caplog: pytest.LogCaptureFixture, level: int, key: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and r.getMessage().startswith(f"{key}=")]


@pytest.mark.parametrize(("key", "corral_value", "other", "refused"), FLAGS, ids=[f[0] for f in FLAGS])
def test_rllib_s_experimental_flags_are_answered_for_what_they_mean(
    key: str, corral_value: object, other: object, refused: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="corral"):
        config = PPOConfig().update_from_dict({key: corral_value, "lr": 0.01})
    assert records(caplog, logging.INFO, key) and not records(caplog, logging.WARNING, key)
    assert config.lr == 0.01 and key not in config.to_dict(), "a flag is answered, never stored"
    if other is None:  # every value asks for what corral does
        return
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="corral"):
        if refused:
            with pytest.raises(ConfigError, match=key):
                PPOConfig().update_from_dict({key: other})
            return
        PPOConfig().update_from_dict({key: other})
    (warning,) = records(caplog, logging.WARNING, key)
    assert warning.startswith(f"{key}={other!r}: ") and "corral" in warning, "it says what corral does"


def test_either_api_stack_is_said_at_info_to_be_corral_s_one_stack(caplog: pytest.LogCaptureFixture) -> None:
    for value in (True, False):
        with caplog.at_level(logging.INFO, logger="corral"):
            PPOConfig().api_stack(enable_rl_module_and_learner=value, enable_env_runner_and_connector_v2=value)
        (info,) = records(caplog, logging.INFO, "enable_rl_module_and_learner")
        assert "corral has one API stack" in info and "learners(num_learners=N)" in info
        assert "a learner_class (a subclass of corral.core.Learner, RLlib's TorchLearner) replaces parts of the update" in info
        assert "ConnectorV2" in records(caplog, logging.INFO, "enable_env_runner_and_connector_v2")[0]
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        caplog.clear()


def test_each_era_s_way_of_setting_the_flags_is_taken(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="corral"):
        config = (
            PPOConfig()
            .experimental(_disable_execution_plan_api=True, _disable_preprocessor_api=False)  # Ray 2.0-2.9
            .rl_module(_enable_rl_module_api=False)  # Ray 2.5
            .training(_enable_learner_api=False, lr=0.02)  # Ray 2.5
            .api_stack(enable_rl_module_and_learner=False, enable_env_runner_and_connector_v2=False)  # Ray 2.10 on
            .resources(num_learner_workers=0, num_gpus_per_learner_worker=0)
        )
        config._enable_new_api_stack = False  # Ray 2.7's attribute
    said = {r.getMessage().split("=")[0] for r in caplog.records if r.levelno == logging.INFO}
    assert {
        "_disable_execution_plan_api",
        "_disable_preprocessor_api",
        "_enable_rl_module_api",
        "_enable_learner_api",
        "enable_rl_module_and_learner",
        "enable_env_runner_and_connector_v2",
        "_enable_new_api_stack",
    } <= said
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert config.lr == 0.02 and config.num_learners == 0 and config.num_gpus_per_learner == 0


def test_a_tune_grid_over_a_flag_is_taken_as_the_one_run_it_is_in_corral(caplog: pytest.LogCaptureFixture) -> None:
    # RLlib's own Ray 1.x cartpole-impala.yaml searches over this flag
    with caplog.at_level(logging.INFO, logger="corral"):
        config = corral.get_config("IMPALA").update_from_dict({"_disable_execution_plan_api": {"grid_search": [True, False]}})
    assert not config.search_space
    assert any("trains the same in corral" in r.getMessage() for r in caplog.records)


def test_a_flag_set_from_a_dict_reads_back_as_set_as_from_experimental() -> None:
    config = PPOConfig().update_from_dict({"_enable_new_api_stack": True, "lr": 0.01})
    assert config._enable_new_api_stack is True and config.lr == 0.01
    assert PPOConfig()._enable_new_api_stack is False  # unset: RLlib's default
    gridded = PPOConfig().update_from_dict({"_disable_execution_plan_api": {"grid_search": [True, False]}})
    assert gridded._disable_execution_plan_api is True  # the grid is dropped: each value trains the same


def test_a_flag_given_what_rllib_never_takes_is_refused() -> None:
    with pytest.raises(ConfigError, match="_enable_new_api_stack takes True or False, not 'yes'"):
        PPOConfig().update_from_dict({"_enable_new_api_stack": "yes"})
    with pytest.raises(ConfigError, match=r"num_learners=-1 is invalid: Input should be greater than or equal to 0"):
        PPOConfig().update_from_dict({"num_learners": -1})
    with pytest.raises(ConfigError, match=r"experimental\(\) takes no option '_fake_gpus'; RLlib's takes"):
        PPOConfig().experimental(_fake_gpus=True)  # RLlib sets it with resources()
    with pytest.raises(ConfigError, match=r"rl_module\(rl_module_spec=\.\.\.\) takes an RLModuleSpec or a MultiRLModuleSpec"):
        PPOConfig().rl_module(rl_module_spec=object())


def test_is_multi_agent_reads_as_rllib_s_method_and_as_its_property() -> None:
    single = PPOConfig()
    multi = PPOConfig().multi_agent(policies={"a", "b"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: "a")
    assert single.is_multi_agent() is False and multi.is_multi_agent() is True  # older Ray 2.x: a method
    assert not single.is_multi_agent and multi.is_multi_agent  # later: a property
    assert single.is_multi_agent == False and multi.is_multi_agent == True  # noqa: E712  (as a bool compares)


def test_a_base_config_with_algo_class_builds_that_algorithm_with_the_base_config_s_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = AlgorithmConfig(algo_class=PPO).environment("CartPole-v1").training(train_batch_size=256).debugging(seed=0)
    with caplog.at_level(logging.INFO, logger="corral"):
        algo = config.build()
    try:
        assert isinstance(algo, PPO) and isinstance(algo.config, PPOConfig)
        assert algo.config.train_batch_size == 256
        # RLlib updates PPO's defaults with the whole base config: its lr default (0.001) replaces PPO's
        assert PPOConfig().lr != AlgorithmConfig().lr and algo.config.lr == AlgorithmConfig().lr
        assert algo.config.clip_param == PPOConfig().clip_param, "PPO's own options keep PPO's defaults"
        assert algo.train()["training_iteration"] == 1
    finally:
        algo.stop()
    said = [r.getMessage() for r in caplog.records if "with algo_class" in r.getMessage()]
    assert said and f"lr=0.001 (where PPOConfig's is {PPOConfig().lr})" in said[0]
    assert "train_batch_size" not in said[0], "a value the config was given is no replaced default"
    with pytest.raises(ConfigError, match="PPO needs a PPOConfig, got DQNConfig"):
        PPO(config=DQNConfig().environment("CartPole-v1"))


def test_a_config_object_as_evaluation_config_is_taken_as_rllib_takes_it() -> None:
    config = PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).debugging(seed=0)
    fresh = PPOConfig().exploration(explore=False).environment(env_config={})
    config.evaluation(evaluation_interval=1, evaluation_duration=2, evaluation_config=fresh)
    assert config.evaluation_config == {"explore": False, "env_config": {}}
    evaluation = config.get_evaluation_config()
    assert evaluation.explore is False and evaluation.env == "CartPole-v1", "a fresh object's defaults keep the training env"
    copied = config.copy().exploration(explore=True)  # RLlib's other way: the training config, changed
    config.evaluation(evaluation_config=copied)
    assert config.get_evaluation_config().explore is True
    algo = config.build()
    try:
        assert algo.train()["evaluation"]["episodes_this_iter"] >= 2
    finally:
        algo.stop()


def test_enable_tf1_exec_eagerly_is_a_tensorflow_option_like_the_others(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="corral"):
        PPOConfig().env_runners(enable_tf1_exec_eagerly=True)
        PPOConfig().update_from_dict({"enable_tf1_exec_eagerly": False})
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings.count("enable_tf1_exec_eagerly is a TensorFlow option; corral runs on torch and ignores it") == 2


def test_rllib_s_attention_keys_are_options_and_one_model_has_one_memory() -> None:
    model = {"use_attention": True, "attention_dim": 32, "attention_memory_inference": 20, "attention_memory_training": 10}
    config = PPOConfig().training(model=model)
    assert (config.model.attention_dim, config.model.attention_memory_training) == (32, 10)
    assert config.to_dict()["model"]["attention_memory_inference"] == 20
    with pytest.raises(ConfigError, match="use_lstm and use_attention are both True"):
        PPOConfig().training(model={"use_attention": True, "use_lstm": True})
    with pytest.raises(ConfigError, match="attention_memory_training=60 is more than attention_memory_inference=50"):
        PPOConfig().training(model={"use_attention": True, "attention_memory_training": 60})


def test_rllib_s_lstm_keys_are_options_and_its_older_combined_switch_sets_both() -> None:
    model = {"use_lstm": True, "max_seq_len": 10, "lstm_cell_size": 32, "lstm_use_prev_action_reward": True}
    config = PPOConfig().training(model=model)
    assert (config.model.use_lstm, config.model.max_seq_len, config.model.lstm_cell_size) == (True, 10, 32)
    assert config.model.lstm_use_prev_action and config.model.lstm_use_prev_reward
    assert config.to_dict()["model"]["lstm_cell_size"] == 32


def test_rllib_s_settings_of_nets_this_config_does_not_ask_for_are_ignored_at_info(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="corral"):
        config = PPOConfig().training(model={"_time_major": True, "uses_new_env_runners": True, "fcnet_hiddens": [32]})
    assert config.model.fcnet_hiddens == [32] and not {"_time_major", "uses_new_env_runners"} & set(config.to_dict()["model"])
    for key in ("_time_major", "uses_new_env_runners"):  # the latter: Ray 2.10's docs set it
        assert sum(key in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records) == 1


def test_post_fcnet_layers_follow_the_hidden_layers_in_rllib_s_activations() -> None:
    def linear_widths(model: Any) -> list[int]:
        return [m.out_features for m in model.modules() if isinstance(m, torch.nn.Linear)]

    def activations(model: Any) -> list[str]:
        return [type(m).__name__ for m in model.encoder.modules() if not isinstance(m, (torch.nn.Linear, torch.nn.Sequential))]

    flat = {"fcnet_hiddens": [32], "fcnet_activation": "tanh", "post_fcnet_hiddens": [16], "post_fcnet_activation": "elu"}
    model = PPOConfig().environment("CartPole-v1").training(model=flat).build().get_policy().model
    assert linear_widths(model.encoder) == [32, 16] and activations(model) == ["Tanh", "Tanh"], "fcnet's activation"
    no_fcnet = {**flat, "fcnet_hiddens": []}
    model = PPOConfig().environment("CartPole-v1").training(model=no_fcnet).build().get_policy().model
    assert linear_widths(model.encoder) == [16] and activations(model) == ["ELU"], "then the post layers' own"
    images = PPOConfig().environment(lambda _: ImageEnv()).training(model={**flat, "conv_filters": [[4, 3, 2]]})
    model = images.build().get_policy().model
    assert linear_widths(model.encoder)[-2:] == [32, 16] and activations(model)[-1] == "ELU", "after the convolutions"


@pytest.mark.parametrize("key", [1, (1, 2), 2.5, None])
def test_a_key_that_is_no_string_is_a_config_error_naming_it(key: object) -> None:
    for apply in (
        lambda config: config.update_from_dict({key: 0.0}),
        lambda config: config.training(**{"model": {key: 1}}),
    ):
        with pytest.raises(ConfigError, match=re.escape(repr(key))):
            apply(PPOConfig())


def test_did_you_mean_takes_any_word() -> None:
    assert corral.errors.did_you_mean(1, ["lr"]) == ""
    assert corral.errors.did_you_mean("gama", ["gamma"]) == " Did you mean 'gamma'?"


def nested(depth: int) -> object:
    value: object = "corral.core.contracts.callbacks:Callbacks"
    for _ in range(depth):
        value = {"callbacks": value}
    return value


@pytest.mark.parametrize(
    "values",
    [
        {"framework": nested(sys.getrecursionlimit() + 10)},
        {"_enable_new_api_stack": nested(sys.getrecursionlimit() + 10)},
        {"no_done_at_end": nested(sys.getrecursionlimit() + 10)},
        {"policies": {"p": corral.PolicySpec(config={"framework": nested(sys.getrecursionlimit() + 10)})}},
    ],
    ids=["framework", "flag", "behaviour", "policy_framework"],
)
def test_a_value_nested_deeper_than_python_s_recursion_limit_is_a_config_error_naming_its_key(values: dict) -> None:
    with pytest.raises(ConfigError, match=r"(framework|_enable_new_api_stack|no_done_at_end)"):
        PPOConfig().environment("CartPole-v1").update_from_dict(values).validate()

"""AlgorithmConfig and PPOConfig: validation at once, legacy keys, round trips, freezing."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral import Callbacks, ConfigError
from corral.core.contracts.config import GROUPS, AlgorithmConfig, ModelConfig
from corral.plugins.ppo import PPO, PPOConfig


class TinyEnv(gym.Env):
    """A module-level env class, so that its 'module:qualname' path imports."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= 5, False, {}


class RecordingCallbacks(Callbacks):
    def on_train_result(self, *, result, **kwargs):
        result["seen"] = True


class OtherCallbacks(Callbacks):
    pass


def _small(config: PPOConfig, tmp_path) -> PPOConfig:
    return (
        config.env_runners(num_envs_per_env_runner=2)
        .training(train_batch_size=32, minibatch_size=16, num_epochs=1, model={"fcnet_hiddens": [8]})
        .reporting(storage_path=str(tmp_path))
        .debugging(seed=0)
    )


# ---------------------------------------------------------------------- #
# builder methods validate at once
# ---------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("builder", "field", "value", "allowed"),
    [
        ("training", "lr", -1, "greater than 0"),
        ("training", "gamma", 2, "less than or equal to 1"),
        ("env_runners", "num_env_runners", -1, "greater than or equal to 0"),
        ("env_runners", "num_envs_per_env_runner", 0, "greater than or equal to 1"),
        ("training", "train_batch_size", 0, "greater than 0"),
        ("debugging", "log_level", "LOUD", "DEBUG"),
        ("env_runners", "vectorize_mode", "fast", "native"),
    ],
)
def test_builder_rejects_bad_value_naming_field_value_and_allowed(builder, field, value, allowed):
    config = PPOConfig()
    with pytest.raises(ConfigError) as info:
        getattr(config, builder)(**{field: value})
    message = str(info.value)
    assert f"{field}={value!r}" in message
    assert allowed in message


def test_bad_value_leaves_config_unchanged():
    config = PPOConfig().training(lr=0.01)
    with pytest.raises(ConfigError):
        config.training(lr=-1)
    assert config.lr == 0.01


def test_config_error_is_corral_error_and_value_error():
    with pytest.raises(corral.CorralError):
        PPOConfig().training(gamma=-0.1)
    with pytest.raises(ValueError):
        PPOConfig().training(gamma=-0.1)


def test_direct_assignment_is_validated():
    config = PPOConfig()
    with pytest.raises(ConfigError, match="lr=0"):
        config.lr = 0
    with pytest.raises(ConfigError, match="Did you mean 'gamma'"):
        config.gama = 0.5


def test_misspelt_key_in_builder_suggests_the_field():
    with pytest.raises(ConfigError) as info:
        PPOConfig().training(lrr=0.1)
    assert "'lrr'" in str(info.value)
    assert "Did you mean 'lr'" in str(info.value)


def test_misspelt_key_in_update_from_dict_suggests_the_field():
    with pytest.raises(ConfigError, match="Did you mean 'gamma'"):
        PPOConfig().update_from_dict({"gama": 0.9})


def test_misspelt_key_in_constructor_is_config_error():
    with pytest.raises(ConfigError, match="Did you mean 'gamma'"):
        PPOConfig(gama=0.9)


def test_key_in_wrong_builder_names_the_owner():
    with pytest.raises(ConfigError) as info:
        PPOConfig().training(num_env_runners=2)
    message = str(info.value)
    assert "num_env_runners" in message
    assert ".env_runners()" in message
    assert ".training()" in message


def test_model_dict_keys_are_validated():
    with pytest.raises(ConfigError) as info:
        PPOConfig().training(model={"fcnet_hidens": [8]})
    assert "'fcnet_hidens'" in str(info.value)
    assert "Did you mean 'fcnet_hiddens'" in str(info.value)


def test_model_dict_values_are_validated():
    with pytest.raises(ConfigError, match="fcnet_hiddens"):
        PPOConfig().training(model={"fcnet_hiddens": [8, 0]})
    with pytest.raises(ConfigError, match="fcnet_activation"):
        PPOConfig().training(model={"fcnet_activation": "sigmoidish"})


def test_model_dict_is_converted_and_partial_dict_keeps_defaults():
    config = PPOConfig().training(model={"fcnet_hiddens": [8], "fcnet_activation": "relu"})
    assert isinstance(config.model, ModelConfig)
    assert config.model.fcnet_hiddens == [8]
    assert config.model.fcnet_activation == "relu"
    assert config.model.vf_share_layers is ModelConfig().vf_share_layers


# ---------------------------------------------------------------------- #
# legacy keys
# ---------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("legacy", "field", "value"),
    [
        ("num_workers", "num_env_runners", 3),
        ("num_rollout_workers", "num_env_runners", 2),
        ("num_envs_per_worker", "num_envs_per_env_runner", 5),
        ("lambda", "lambda_", 0.5),
        ("num_sgd_iter", "num_epochs", 7),
        ("sgd_minibatch_size", "minibatch_size", 33),
    ],
)
def test_legacy_keys_map_to_new_fields(legacy, field, value):
    config = PPOConfig().update_from_dict({legacy: value})
    assert getattr(config, field) == value
    assert PPOConfig.from_dict({legacy: value}).to_dict()[field] == value


def test_legacy_keys_in_builders():
    config = PPOConfig().rollouts(num_rollout_workers=0, num_envs_per_worker=3)
    assert config.num_env_runners == 0
    assert config.num_envs_per_env_runner == 3
    config.rollouts(num_rollout_workers=2)
    assert config.num_env_runners == 2
    config.training(**{"lambda": 0.7, "num_sgd_iter": 4, "sgd_minibatch_size": 16})
    assert (config.lambda_, config.num_epochs, config.minibatch_size) == (0.7, 4, 16)


def test_legacy_key_values_are_validated():
    with pytest.raises(ConfigError, match="num_env_runners=-1"):
        PPOConfig().update_from_dict({"num_workers": -1})


def test_framework_torch_accepted_others_than_rllib_s_rejected():
    config = PPOConfig().update_from_dict({"framework": "torch", "lr": 0.01})
    assert config.lr == 0.01
    assert "framework" not in config.to_dict()
    with pytest.raises(ConfigError) as info:
        PPOConfig().update_from_dict({"framework": "jax"})
    assert "'jax'" in str(info.value)
    assert "torch" in str(info.value)
    with pytest.raises(ConfigError, match=r"framework=array\(\[1, 2\]\) is not supported"):  # found by the fuzzer
        PPOConfig().update_from_dict({"framework": np.array([1, 2])})


# ---------------------------------------------------------------------- #
# dict round trip, copy, freeze
# ---------------------------------------------------------------------- #
def _configured() -> PPOConfig:
    return (
        PPOConfig()
        .environment(TinyEnv, env_config={"size": 3, "nested": {"a": [1, 2]}})
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=16)
        .training(
            lr=0.005,
            gamma=0.9,
            lambda_=0.8,
            lr_schedule=[[0, 0.01], [1000, 0.001]],
            model={"fcnet_hiddens": [16, 8], "fcnet_activation": "relu", "vf_share_layers": True},
        )
        .callbacks([RecordingCallbacks, OtherCallbacks])
        .evaluation(evaluation_interval=2, evaluation_config={"explore": False, "env_config": {"size": 4}})
        .exploration(exploration_config={"type": "StochasticSampling", "random_timesteps": 10})
        .debugging(seed=3)
    )


def test_to_dict_is_json_serialisable_with_import_paths():
    data = _configured().to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["env"] == "tests.core.test_config:TinyEnv"
    assert data["callbacks_class"] == [
        "tests.core.test_config:RecordingCallbacks",
        "tests.core.test_config:OtherCallbacks",
    ]
    assert data["model"]["fcnet_hiddens"] == [16, 8]
    assert data["model"]["vf_share_layers"] is True
    assert data["lambda_"] == 0.8


def test_from_dict_round_trips():
    original = _configured()
    data = original.to_dict()
    restored = PPOConfig.from_dict(json.loads(json.dumps(data)))
    assert isinstance(restored, PPOConfig)
    assert restored.to_dict() == data
    assert restored.callbacks_class == [RecordingCallbacks, OtherCallbacks]
    assert restored.model == original.model
    assert restored.lr == 0.005 and restored.gamma == 0.9


def test_a_space_inside_env_config_comes_back_a_space_after_json() -> None:
    # RLlib's nested_action_spaces.py hands its env the space to act in through env_config
    space = gym.spaces.Dict({"a": gym.spaces.Tuple([gym.spaces.Box(-1.0, 1.0, ())]), "b": gym.spaces.Discrete(3)})
    config = PPOConfig().environment("CartPole-v1", env_config={"space": space, "parts": [{"n": gym.spaces.Discrete(2)}]})
    data = json.loads(json.dumps(config.to_dict()))
    restored = PPOConfig.from_dict(data)
    assert restored.env_config["space"] == space and restored.env_config["parts"] == [{"n": gym.spaces.Discrete(2)}]
    assert restored.to_dict() == data


def test_round_tripped_env_path_builds_the_env(tmp_path):
    data = _small(_configured(), tmp_path).to_dict()
    algo = PPOConfig.from_dict(data).build()
    try:
        runner = algo.env_runner_group.local_env_runner
        assert runner.observation_space == TinyEnv.observation_space
        assert runner.action_space == TinyEnv.action_space
    finally:
        algo.stop()


def test_callbacks_given_as_import_path_resolve_to_the_class():
    config = PPOConfig().callbacks("tests.core.test_config:RecordingCallbacks")
    assert config.callbacks_class == [RecordingCallbacks]


def test_callbacks_must_be_callbacks_subclasses():
    with pytest.raises(ConfigError, match=r"not a subclass of corral\.Callbacks"):
        PPOConfig().callbacks(dict)
    with pytest.raises(ConfigError, match="no_such_module"):
        PPOConfig().callbacks("no_such_module:Thing")


def test_copy_is_deep_and_unfrozen():
    original = _configured()
    original.freeze()
    clone = original.copy()
    assert not clone.is_frozen
    assert original.is_frozen
    clone.training(lr=0.5)
    clone.model.fcnet_hiddens.append(4)
    clone.env_config["nested"]["a"].append(3)
    assert original.lr == 0.005
    assert original.model.fcnet_hiddens == [16, 8]
    assert original.env_config["nested"]["a"] == [1, 2]
    assert clone.copy(copy_frozen=True).is_frozen is False
    assert original.copy(copy_frozen=True).is_frozen is True


def test_freeze_makes_assignment_raise():
    config = PPOConfig().freeze()
    assert config.is_frozen
    with pytest.raises(ConfigError, match="frozen"):
        config.lr = 0.1
    with pytest.raises(ConfigError, match="frozen"):
        config.training(lr=0.1)
    with pytest.raises(ConfigError, match="frozen"):
        config.update_from_dict({"gamma": 0.5})
    assert config.lr == 2e-3 and config.gamma == 0.99


def test_list_and_dict_defaults_are_not_shared():
    a, b = PPOConfig(), PPOConfig()
    a.env_config["x"] = 1
    a.model.fcnet_hiddens.append(3)
    assert b.env_config == {}
    assert b.model.fcnet_hiddens == [64, 64]


# ---------------------------------------------------------------------- #
# subclass defaults
# ---------------------------------------------------------------------- #
def test_subclass_defaults_override_without_touching_base():
    assert PPOConfig().lr == 2e-3
    assert AlgorithmConfig().lr == 1e-3
    assert PPOConfig().grad_clip is None  # RLlib's
    assert AlgorithmConfig().grad_clip is None
    # the constraint of the overridden field still holds
    with pytest.raises(ConfigError, match="lr=0"):
        PPOConfig().training(lr=0)


def test_subclass_adds_its_own_fields_only_to_itself():
    assert PPOConfig().clip_param == 0.3  # RLlib's
    with pytest.raises(ConfigError, match="clip_param"):
        AlgorithmConfig().training(clip_param=0.3)


def test_subclass_defaults_naming_unknown_field_fail():
    with pytest.raises(TypeError, match="no_such_field"):

        class _Bad(AlgorithmConfig, defaults={"no_such_field": 1}):
            pass


# ---------------------------------------------------------------------- #
# validate()
# ---------------------------------------------------------------------- #
def test_validate_without_env():
    with pytest.raises(ConfigError, match="no environment"):
        PPOConfig().validate()


def test_validate_unknown_exploration_type_lists_and_suggests():
    config = PPOConfig().environment("CartPole-v1").exploration(exploration_config={"type": "EpsilonGredy"})
    with pytest.raises(ConfigError) as info:
        config.validate()
    message = str(info.value)
    assert "'EpsilonGredy'" in message
    assert "Did you mean 'EpsilonGreedy'" in message
    assert "StochasticSampling" in message


def test_an_exploration_config_without_type_merges_into_the_current_one_as_rllib_s_does():
    config = PPOConfig().environment("CartPole-v1").exploration(exploration_config={"epsilon": 0.1})
    assert config.exploration_config == {"type": "StochasticSampling", "epsilon": 0.1}
    with pytest.raises(ConfigError, match=r"exploration StochasticSampling has no option 'epsilon'"):
        config.validate()


def test_validate_exploration_without_type():
    config = PPOConfig().environment("CartPole-v1")
    config.exploration_config = {"epsilon": 0.1}  # assigned whole, nothing to merge into
    with pytest.raises(ConfigError, match=r"exploration_config needs a 'type' naming an exploration plugin"):
        config.validate()


def test_validate_unknown_exploration_option():
    config = (
        PPOConfig().environment("CartPole-v1").exploration(exploration_config={"type": "EpsilonGreedy", "final_epsilom": 0.1})
    )
    with pytest.raises(ConfigError) as info:
        config.validate()
    message = str(info.value)
    assert "'final_epsilom'" in message
    assert "Did you mean 'final_epsilon'" in message


def test_validate_evaluation_config_with_bad_key():
    config = PPOConfig().environment("CartPole-v1").evaluation(evaluation_config={"gama": 0.5})
    with pytest.raises(ConfigError) as info:
        config.validate()
    message = str(info.value)
    assert "evaluation_config" in message
    assert "Did you mean 'gamma'" in message


def test_validate_evaluation_config_with_bad_value():
    config = PPOConfig().environment("CartPole-v1").evaluation(evaluation_config={"gamma": 3})
    with pytest.raises(ConfigError) as info:
        config.validate()
    assert "evaluation_config" in str(info.value)
    assert "gamma=3" in str(info.value)


def test_validate_evaluation_config_cannot_nest():
    config = PPOConfig().environment("CartPole-v1").evaluation(evaluation_config={"evaluation_interval": 1})
    with pytest.raises(ConfigError, match="does not nest"):
        config.validate()


def test_validate_ppo_minibatch_larger_than_train_batch():
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=512)
    with pytest.raises(ConfigError) as info:
        config.validate()
    assert "minibatch_size=512" in str(info.value)
    assert "train_batch_size=256" in str(info.value)
    assert "or 'auto'" in str(info.value)


def test_ppo_s_auto_minibatch_is_512_rows_or_the_whole_smaller_train_batch(make_algo):
    small = make_algo(PPOConfig().environment("CartPole-v1").training(train_batch_size=256, num_epochs=2))
    assert small.config.minibatch_size == "auto"
    stats = small.train()["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats["num_sgd_updates"] == 2  # one minibatch of the whole batch per epoch, no error about a default
    large = make_algo(PPOConfig().environment("CartPole-v1").training(train_batch_size=1100, num_epochs=1))
    result = large.train()
    assert result["info"]["learner"]["default_policy"]["learner_stats"]["num_sgd_updates"] == -(
        -result["num_env_steps_trained"] // 512
    )


def test_validate_accepts_a_good_config():
    PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=256).validate()


def test_evaluation_config_is_applied_by_get_evaluation_config():
    config = PPOConfig().environment("CartPole-v1").evaluation(evaluation_config={"explore": False, "lambda": 0.3})
    eval_config = config.get_evaluation_config()
    assert eval_config.explore is False
    assert eval_config.lambda_ == 0.3
    assert config.explore is True and config.lambda_ == 0.95


# ---------------------------------------------------------------------- #
# build()
# ---------------------------------------------------------------------- #
def test_build_returns_ppo_with_frozen_config(tmp_path):
    config = _small(PPOConfig().environment("CartPole-v1"), tmp_path).training(lr=0.002)
    algo = config.build()
    try:
        assert isinstance(algo, PPO)
        assert isinstance(algo.config, PPOConfig)
        assert algo.config.is_frozen
        assert algo.config.lr == 0.002
        with pytest.raises(ConfigError, match="frozen"):
            algo.config.lr = 0.1
        # the user's config stays usable and is not the algorithm's
        config.training(lr=0.003)
        assert algo.config.lr == 0.002
    finally:
        algo.stop()


def test_build_validates():
    with pytest.raises(ConfigError, match="minibatch_size"):
        PPOConfig().environment("CartPole-v1").training(train_batch_size=64, minibatch_size=128).build()


def test_build_with_env_argument(tmp_path):
    algo = _small(PPOConfig(), tmp_path).build(env=TinyEnv)
    try:
        assert algo.config.env is TinyEnv
    finally:
        algo.stop()


def test_base_config_belongs_to_no_algorithm():
    with pytest.raises(ConfigError, match="belongs to no algorithm"):
        AlgorithmConfig().environment("CartPole-v1").build()


def test_get_config_from_registry_is_ppo_config():
    config = corral.get_config("ppo")
    assert isinstance(config, PPOConfig)
    assert config.lr == 2e-3


# ---------------------------------------------------------------------- #
# field documentation
# ---------------------------------------------------------------------- #
def _every_installed_config_field():
    for info in corral.list_algorithms():
        config_class = type(corral.get_config(info.name))
        for name in config_class.model_fields:
            yield pytest.param(config_class, name, id=f"{info.name}.{name}")


@pytest.mark.parametrize("config_class, name", list(_every_installed_config_field()))
def test_every_field_of_every_installed_algorithm_has_a_description_and_a_known_group(config_class, name):
    field = config_class.model_fields[name]
    assert field.description and field.description.strip(), f"{config_class.__name__}.{name} has no docstring"
    assert config_class.field_group(name) in GROUPS


@pytest.mark.parametrize("name", list(ModelConfig.model_fields))
def test_every_model_field_has_a_description(name):
    assert (ModelConfig.model_fields[name].description or "").strip()


@pytest.mark.parametrize("name", [n for n in PPOConfig.model_fields if n not in AlgorithmConfig.model_fields])
def test_ppo_fields_are_set_with_training(name):
    assert PPOConfig.field_group(name) == "training"
    PPOConfig().training(**{name: getattr(PPOConfig(), name)})


def test_the_model_config_reads_and_writes_as_rllib_s_model_dict_until_it_is_frozen() -> None:
    config = corral.get_config("PPO")
    config.model["vf_share_layers"] = True  # RLlib's examples write config.model as a dict
    config.model.update({"lstm_use_prev_action_reward": True, "fcnet_hiddens": [32]})  # RLlib's older key too
    assert config.model["vf_share_layers"] and config.model.lstm_use_prev_reward and config.model["fcnet_hiddens"] == [32]
    assert config.model.get("no_such_key", 7) == 7 and "use_lstm" in config.model and "no_such_key" not in config.model
    with pytest.raises(ConfigError, match=r"model has no option 'fcnet_hidens'\. Did you mean 'fcnet_hiddens'"):
        config.model["fcnet_hidens"] = [8]
    with pytest.raises(ConfigError, match="use_lstm and use_attention are both True"):
        config.model.update({"use_lstm": True, "use_attention": True})
    assert not config.model.use_lstm, "a refused update changes nothing"
    with pytest.raises(KeyError, match="no option 'fcnet_hidens'"):
        config.model["fcnet_hidens"]
    copy = config.copy()
    config.freeze()
    for write in (lambda: config.model.__setitem__("use_lstm", True), lambda: setattr(config.model, "use_lstm", True)):
        with pytest.raises(ConfigError, match="frozen"):
            write()
    copy.model["use_lstm"] = True  # a copy is not frozen
    assert copy.model.use_lstm and not config.model.use_lstm

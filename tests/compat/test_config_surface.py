"""RLlib's config surface as its documentation uses it: the framework, log levels, and the config read as a mapping."""

from __future__ import annotations

import logging
from typing import Any

import pytest

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
    for flags in (["--framework", "torch"], ["--torch"], ["--framework", "tf2"]):
        config = '{"train_batch_size": 64, "minibatch_size": 64, "num_envs_per_env_runner": 2}'
        proc = run_cli("train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", stop, "--config", config, *flags)
        assert proc.returncode == 0, proc.stderr
        if "tf2" in flags:
            assert "runs this config on torch" in proc.stderr

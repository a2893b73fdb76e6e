"""RLlib 2.x's spellings a script writes and reads: experimental flags, ``framework_str``, SAC's and the offline
options' names, and where a result holds each policy's stats."""

from __future__ import annotations

import logging

import pytest

import corral
from corral import ConfigError


def test_rllib_s_experimental_flags_read_back_as_set_or_as_rllib_s_defaults() -> None:
    config = corral.get_config("PPO")
    assert config._enable_new_api_stack is False and config._disable_execution_plan_api is True
    config.experimental(_enable_new_api_stack=True)
    copied = config.copy()
    config._enable_new_api_stack = False
    assert (config._enable_new_api_stack, copied._enable_new_api_stack) == (False, True), "a copy keeps its own flags"
    assert config.api_stack(enable_rl_module_and_learner=True).enable_rl_module_and_learner is True
    with pytest.raises(AttributeError, match="_enable_no_such_flag"):
        config._enable_no_such_flag  # noqa: B018


def test_framework_str_is_rllib_s_framework_attribute_as_a_key_and_reads_torch() -> None:
    assert corral.get_config("PPO").framework_str == "torch"
    policy_config = corral.get_config("PPO").overrides(framework_str="torch", lr=1e-3)
    config = corral.get_config("PPO").multi_agent(policies={"a": (None, None, None, policy_config)})
    assert config.update_from_dict({"framework_str": "tf2"}).framework_str == "torch"
    with pytest.raises(ConfigError, match=r"framework='jax' is not supported"):
        corral.get_config("PPO").update_from_dict({"framework_str": "jax"})


def test_rllib_2x_offline_and_sac_spellings_set_what_they_name(caplog: pytest.LogCaptureFixture) -> None:
    assert corral.get_config("SAC").training(clip_actions=True).clip_actions is True  # RLlib's SAC takes it in training()
    dataset = corral.get_config("CQL").offline_data(input_="dataset", input_config={"paths": "/data/a.json", "format": "json"})
    assert (dataset.input_, dataset.input_config) == (["/data/a.json"], {"format": "json"})
    with caplog.at_level(logging.WARNING, logger="corral"):
        sampled = corral.get_config("CQL").offline_data(input_config={"paths": ["/data/a.json"]})
    assert sampled.input_ == "sampler" and sampled.input_config == {}
    assert "read only with input_='dataset', as in RLlib" in caplog.text
    with pytest.raises(ConfigError, match=r"input_='dataset' reads the files input_config=\{'paths'"):
        corral.get_config("CQL").offline_data(input_="dataset")


def test_learner_info_is_rllib_s_old_stack_layout_and_keeps_an_entry_already_in_it() -> None:
    from corral.core.results import learner_info

    flat = {"total_loss": 1.0, "kl": 0.1, "model": {"term": 2.0}, "custom_metrics": {"rows": 3}, "td_error": [0.5]}
    flat["num_agent_steps_trained"] = 7
    written = {"learner_stats": {"loss": 0.5}, "extra": 1}
    info = learner_info({"a": flat, "b": written, "c": {"loss": 2.0}})
    assert info["a"] == {
        "learner_stats": {"total_loss": 1.0, "kl": 0.1},
        "model": {"term": 2.0},
        "custom_metrics": {"rows": 3},
        "td_error": [0.5],
        "num_agent_steps_trained": 7,
    }
    assert info["b"] is written, "a training_step's own entry in RLlib's layout stays as it is"
    assert info["c"] == {"learner_stats": {"loss": 2.0}, "model": {}, "custom_metrics": {}}


def test_a_result_holds_each_policy_s_stats_where_rllib_s_old_stack_puts_them(make_algo) -> None:
    from corral.rllib.utils.metrics.learner_info import LEARNER_INFO, LEARNER_STATS_KEY

    algo = make_algo(corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=128, minibatch_size=64))
    result = algo.train()
    policy_info = result["info"][LEARNER_INFO]["default_policy"]
    assert {"total_loss", "policy_loss", "vf_loss", "kl", "entropy", "cur_lr"} <= set(policy_info[LEARNER_STATS_KEY])
    assert policy_info["model"] == {} and policy_info["custom_metrics"] == {}
    assert policy_info["num_agent_steps_trained"] == result["num_agent_steps_trained"] >= 128

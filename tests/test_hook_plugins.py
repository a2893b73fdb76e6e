"""An installed hook plugin (entry-point group corral.hooks) observes every run; tracing shows who answered."""

from __future__ import annotations

import json

import pytest

import corral.registry as registry

from .conftest import small_ppo_config
from .registry.conftest import PluginEnv

RUN_LOGGER = """
import json, os
import corral

@corral.hookimpl
def on_train_result(algorithm, result):
    entry = {"algo": type(algorithm).__name__, "iteration": result["training_iteration"], "counted": "counted" in result}
    with open(os.environ["RUN_LOG"], "a") as f:
        f.write(json.dumps(entry) + "\\n")
"""


@pytest.fixture
def run_logger(tmp_path, monkeypatch):
    """A distribution 'corral-runlog' with a hook plugin that logs every iteration of every run."""
    site = tmp_path / "site"
    plugins = PluginEnv(site)
    plugins.add_dist(
        "corral-runlog", "0.2", entry_points={"corral.hooks": {"runlog": "corral_runlog"}}, modules={"corral_runlog": RUN_LOGGER}
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("RUN_LOG", str(tmp_path / "runs.jsonl"))
    registry.refresh()
    yield tmp_path / "runs.jsonl"
    registry.refresh()
    plugins.forget_modules()


def test_an_installed_hook_plugin_sees_every_iteration_of_every_run(run_logger, make_algo) -> None:
    for _ in range(2):
        algo = make_algo()
        algo.train()
        algo.train()
    lines = [json.loads(line) for line in run_logger.read_text().splitlines()]
    assert lines == [{"algo": "PPO", "iteration": i, "counted": False} for i in (1, 2, 1, 2)]


def test_tracing_prints_each_hook_call_and_the_implementations_that_answered(run_logger, monkeypatch, capsys) -> None:
    from corral import Callbacks

    class Counting(Callbacks):
        def on_train_result(self, *, result, **kwargs):
            result["counted"] = True

    monkeypatch.setenv("CORRAL_TRACE_PLUGINS", "1")
    algo = small_ppo_config().callbacks(Counting).build()
    result = algo.train()
    algo.stop()
    err = capsys.readouterr().err
    assert result["counted"]
    assert json.loads(run_logger.read_text())["counted"]  # the plugin saw what the callback added
    assert "[corral trace] on_environment_created(env_runner, worker, env, env_context) -> no implementations" in err
    assert "[corral trace] on_train_result(algorithm, result) -> " in err
    answered = next(line for line in err.splitlines() if "on_train_result(" in line).split(" -> ")[1]
    first, *plugins = answered.split(", ")  # the user's callbacks, then the hook plugins that observe them
    assert first.endswith("Counting#0")
    assert sorted(plugins) == ["mlflow (corral)", "runlog (corral-runlog)", "wandb (corral)"]  # corral's loggers, idle


def test_without_the_variable_nothing_is_traced(run_logger, make_algo, capsys) -> None:
    make_algo().train()
    assert "[corral trace]" not in capsys.readouterr().err

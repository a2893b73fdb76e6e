"""The MLflow and W&B loggers: hook plugins from corral's own entry points, checked against the real libraries.

MLflow writes to a local file store and W&B runs offline, so neither needs a
server or an account.
"""

from __future__ import annotations

import json

import pytest

import corral
from corral.errors import ConfigError
from corral.plugins import loggers
from corral.plugins.loggers import wandb_logger


@pytest.fixture(autouse=True)
def _offline(monkeypatch) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # the plugin sets it for its default store
    monkeypatch.setenv("WANDB_SILENT", "true")


def tracked(ppo_config, **logger_config):
    return ppo_config.debugging(logger_config=logger_config)


def test_mlflow_records_the_config_and_each_iterations_results_at_its_env_steps(make_algo, ppo_config, results_dir) -> None:
    from mlflow.tracking import MlflowClient

    algo = make_algo(tracked(ppo_config, mlflow={"experiment_name": "cartpole", "tags": {"who": "test"}}))
    results = [algo.train() for _ in range(2)]
    algo.stop()
    store = results_dir / "mlruns"  # beside the experiment folders
    assert algo.logdir.parent == results_dir and store.is_dir()
    client = MlflowClient(store.as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("cartpole").experiment_id])
    assert run.info.run_name == algo.logdir.name and run.info.status == "FINISHED"
    assert run.data.params["lr"] == "0.002" and run.data.params["env"] == "CartPole-v1"
    assert run.data.tags["who"] == "test" and run.data.tags["corral.algorithm"] == "PPO"
    history = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "episode_reward_mean")]
    assert history == [(r["num_env_steps_sampled"], pytest.approx(r["episode_reward_mean"])) for r in results]
    assert client.get_metric_history(run.info.run_id, "info/learner/default_policy/learner_stats/kl")


def test_mlflow_takes_a_tracking_uri(make_algo, ppo_config, tmp_path) -> None:
    from mlflow.tracking import MlflowClient

    store = tmp_path / "elsewhere"
    algo = make_algo(tracked(ppo_config, mlflow={"tracking_uri": store.as_uri()}))
    algo.train()
    algo.stop()
    client = MlflowClient(store.as_uri())
    assert len(client.search_runs([client.get_experiment_by_name("corral").experiment_id])) == 1


def test_wandb_runs_offline_without_a_key_into_the_experiment_folder(make_algo, ppo_config) -> None:
    algo = make_algo(tracked(ppo_config, wandb={"project": "cartpole", "group": "seeds"}))
    results = [algo.train() for _ in range(2)]
    run = wandb_logger._runs[id(algo)]
    assert run.settings.mode == "offline" and run.project == "cartpole" and run.group == "seeds"
    assert run.name == algo.logdir.name and run.config["lr"] == 0.002
    assert run.step == results[-1]["num_env_steps_sampled"]  # W&B's step is the env steps logged last
    algo.stop()
    assert id(algo) not in wandb_logger._runs
    (offline,) = (algo.logdir / "wandb").glob("offline-run-*")
    (records,) = offline.glob("run-*.wandb")
    assert records.stat().st_size > 0  # what `wandb sync` uploads


def test_the_loggers_stay_idle_unless_asked(make_algo, ppo_config, results_dir) -> None:
    algo = make_algo(ppo_config)
    algo.train()
    algo.stop()
    assert not (results_dir / "mlruns").exists() and not (algo.logdir / "wandb").exists()


@pytest.mark.parametrize(
    ("logger_config", "said"),
    [
        ({"mlflow": {"experiment": "x"}}, "logger_config 'mlflow' has no setting 'experiment'; its settings are tracking_uri"),
        ({"wandb": "cartpole"}, "logger_config 'wandb' must be a dict of settings"),
    ],
)
def test_bad_settings_are_refused_at_build(ppo_config, logger_config, said) -> None:
    with pytest.raises(ConfigError, match=said):
        tracked(ppo_config, **logger_config).build()


def test_a_missing_library_names_its_extra(ppo_config, monkeypatch) -> None:
    real = loggers.importlib.import_module

    def missing(name, *args):
        if name == "wandb":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(loggers.importlib, "import_module", missing)
    with pytest.raises(ConfigError, match=r"asks for wandb, which is not installed: pip install 'corral\[wandb\]'"):
        tracked(ppo_config, wandb={}).build()


def test_both_are_hook_plugins_of_corral_itself(run_cli) -> None:
    listed = json.loads(run_cli("list", "--json").stdout)["hook_plugins"]
    assert {(p["name"], p["dist"]) for p in listed} >= {("mlflow", "corral"), ("wandb", "corral")}
    assert corral.__version__

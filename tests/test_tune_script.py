"""An RLlib-style script run as ``python script.py``: its own env class, mapping function and callbacks reach Tune trials.

The objects must live in the script's ``__main__`` (which no trial process can
import), so the script is a real file run in a subprocess that starts its own
Ray; each trial samples on a remote env runner.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    '''
    import json
    import sys

    import gymnasium as gym
    import numpy as np
    import ray
    from ray import tune
    from ray.tune.registry import get_trainable_cls, register_env

    import corral
    import corral.tune


    class Corridor(corral.MultiAgentEnv):
        """Two agents, rewarded for action 1, for `length` steps."""

        def __init__(self, config):
            super().__init__()
            self.length = config.get("length", 4)
            self.possible_agents = ["a", "b"]
            self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
            self.action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            self.agents = list(self.possible_agents)
            return {agent: np.zeros(1, np.float32) for agent in self.agents}, {}

        def step(self, actions):
            self.t += 1
            obs = {agent: np.full(1, self.t / self.length, np.float32) for agent in actions}
            rewards = {agent: float(action) for agent, action in actions.items()}
            return obs, rewards, {"__all__": self.t >= self.length}, {"__all__": False}, {}


    def mapping(agent_id, episode, **kwargs):
        return f"p_{agent_id}"


    class CountEpisodes(corral.Callbacks):
        def on_episode_end(self, *, episode, **kwargs):
            episode.custom_metrics["script_callback"] = 1.0


    register_env("corridor", lambda config: Corridor(config))  # Ray Tune's registry, as RLlib scripts do

    config = (
        get_trainable_cls("PPO")
        .get_default_config()
        .environment(tune.grid_search([Corridor, "corridor"]), env_config={"length": 4})
        .env_runners(num_env_runners=1, num_envs_per_env_runner=1, rollout_fragment_length=32)
        .training(train_batch_size=64, minibatch_size=32, num_epochs=1)
        .multi_agent(policies={"p_a", "p_b"}, policy_mapping_fn=mapping)
        .callbacks(CountEpisodes)
        .reporting(log_to_tensorboard=False)
        .debugging(seed=0)
    )
    ray.init(address="local", num_cpus=2, include_dashboard=False, configure_logging=False)
    results = tune.Tuner(
        "PPO",
        param_space=config,  # the config object itself
        run_config=tune.RunConfig(storage_path=sys.argv[1], name="script", stop={"training_iteration": 2}, verbose=0),
    ).fit()
    trials = [results[i] for i in range(len(results))]
    print("RESULT " + json.dumps({
        "errors": [str(error) for error in results.errors],
        "trials": [
            {
                "env": str(trial.config["env"]),
                "training_iteration": trial.metrics.get("training_iteration"),
                "num_healthy_env_runners": trial.metrics.get("num_healthy_env_runners"),
                "custom_metrics": sorted(trial.metrics.get("custom_metrics", {})),
                "policies": sorted(trial.metrics.get("policy_reward_mean", {})),
            }
            for trial in trials
        ],
    }))
    '''
)


def test_a_script_s_own_env_class_mapping_and_callbacks_reach_every_tune_trial(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "ray_results")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "RAY_DEDUP_LOGS": "0"},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    summary = json.loads(line.removeprefix("RESULT "))
    assert summary["errors"] == []
    assert sorted(trial["env"] for trial in summary["trials"]) == ["__main__:Corridor", "corridor"]
    for trial in summary["trials"]:
        assert trial["training_iteration"] == 2
        assert trial["num_healthy_env_runners"] == 1  # sampled on a remote env runner
        assert trial["policies"] == ["p_a", "p_b"]  # the script's mapping function ran
        assert "script_callback_mean" in trial["custom_metrics"]  # the script's callbacks ran

"""corral against RLlib: multi-agent PPO, one policy per agent, on 2- and 4-agent CartPole, in one run, as ratios.

Each (library, number of agents, seed) trains in its own fresh Python process
until every policy's mean episode return reaches 450 (or a budget of env steps
runs out), and reports:

- seconds to target: wall-clock time in ``train()`` until every policy's mean
  return (over the last 100 episodes) is at least 450; building is not counted;
- env steps per second: env steps sampled over that same time (an env step
  moves every agent once).

Both libraries get the same settings, those of corral's tuned example
``ppo_multi_cartpole.yaml`` (16 envs in the local runner, batch 4096,
minibatch 512, 10 epochs, lr 2e-3, gamma 0.99, lambda 0.95, no KL penalty, a
64x64 tanh MLP per policy), the same env (gymnasium's CartPole, one copy per
agent; the episode ends when every pole has fallen or hit 500 steps) and the
mapping agent ``i`` -> policy ``p{i}``. Everything else is each library's
default; RLlib runs its default (new) API stack.

    pip install -e ".[bench]"
    python benchmarks/compare_rllib_multi_agent.py --seeds 0 1

Writes benchmarks/results/rllib_multi_agent.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from compare_rllib import run_in_fresh_process  # this folder is on sys.path when a script here runs

HERE = Path(__file__).resolve().parent
TARGET = 450.0
BUDGET_STEPS = 600_000
"""env steps after which a run that has not reached the target stops (reported as not reached)"""
SETTINGS = {
    "num_envs_per_env_runner": 16,
    "train_batch_size": 4096,
    "minibatch_size": 512,
    "num_epochs": 10,
    "lr": 2e-3,
    "gamma": 0.99,
    "lambda_": 0.95,
    "kl_coeff": 0.0,
}


def run_until_target(train: Any, policy_returns: Any, env_steps: Any, num_agents: int) -> dict[str, Any]:
    """Call ``train()`` until every policy's mean return reaches :data:`TARGET`; time and steps taken."""
    seconds, history = 0.0, []
    while env_steps() < BUDGET_STEPS:
        start = time.perf_counter()
        result = train()
        seconds += time.perf_counter() - start
        returns = policy_returns(result)
        history.append([env_steps(), round(seconds, 2), {k: round(v, 1) for k, v in returns.items()}])
        if len(returns) == num_agents and min(returns.values()) >= TARGET:
            return {"reached": True, "seconds": seconds, "env_steps": env_steps(), "steps_per_s": env_steps() / seconds,
                    "history": history}  # fmt: skip
    return {"reached": False, "seconds": seconds, "env_steps": env_steps(), "steps_per_s": env_steps() / seconds,
            "history": history}  # fmt: skip


def run_corral(num_agents: int, seed: int) -> dict[str, Any]:
    """corral's PPO with a policy per agent."""
    import corral
    from corral.core.contracts.multi_agent_config import policy_per_agent

    config = (
        corral.get_config("PPO")
        .environment(corral.make_multi_agent("CartPole-v1"), env_config={"num_agents": num_agents})
        .update_from_dict({**SETTINGS, "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"}})
        .multi_agent(policies={f"p{i}" for i in range(num_agents)}, policy_mapping_fn=policy_per_agent)
        .reporting(log_to_tensorboard=False)
        .debugging(seed=seed)
    )
    algo = config.build()
    out = run_until_target(
        algo.train, lambda r: r["policy_reward_mean"], lambda: algo.counters["num_env_steps_sampled"], num_agents
    )
    algo.stop()
    return out


def run_rllib(num_agents: int, seed: int) -> dict[str, Any]:
    """RLlib's PPO with the same settings and mapping."""
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole

    ray.init(num_cpus=4, include_dashboard=False, configure_logging=False)
    s = SETTINGS
    policies = {f"p{i}" for i in range(num_agents)}
    config = (
        PPOConfig()
        .environment(MultiAgentCartPole, env_config={"num_agents": num_agents})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=s["num_envs_per_env_runner"])
        .training(
            train_batch_size_per_learner=s["train_batch_size"],
            minibatch_size=s["minibatch_size"],
            num_epochs=s["num_epochs"],
            lr=s["lr"],
            gamma=s["gamma"],
            lambda_=s["lambda_"],
            kl_coeff=s["kl_coeff"],
        )
        .multi_agent(policies=policies, policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{agent_id}")
        .rl_module(
            rl_module_spec=MultiRLModuleSpec(rl_module_specs={pid: RLModuleSpec() for pid in policies}),
            model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="tanh"),
        )
        .debugging(seed=seed)
    )
    algo = config.build_algo()

    def env_steps() -> int:
        return int(algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"), default=0))

    def returns(result: dict[str, Any]) -> dict[str, float]:
        return dict(result.get("env_runners", {}).get("module_episode_returns_mean", {}))

    out = run_until_target(algo.train, returns, env_steps, num_agents)
    algo.stop()
    ray.shutdown()
    return out


def measure(library: str, num_agents: int, seed: int) -> dict[str, Any]:
    """One run in a fresh process; its parsed ``RESULT`` line."""
    return run_in_fresh_process([__file__, "_child", library, str(num_agents), str(seed)], timeout=3600)


def table(results: dict[str, list[dict[str, Any]]], agent_counts: list[int]) -> str:
    """The markdown table in benchmarks/README.md: medians over seeds, and their ratios."""

    def median(key: str, metric: str) -> float | None:
        runs = [r for r in results.get(key, []) if r.get("reached")]
        return statistics.median(r[metric] for r in runs) if runs else None

    rows = ["| agents | measure | corral | RLlib | corral / RLlib |", "|---|---|---|---|---|"]
    for n in agent_counts:
        ours_rate, theirs_rate = median(f"corral {n}", "steps_per_s"), median(f"rllib {n}", "steps_per_s")
        ours_time, theirs_time = median(f"corral {n}", "seconds"), median(f"rllib {n}", "seconds")
        rate = f"**{ours_rate / theirs_rate:.1f}x**" if ours_rate and theirs_rate else "n/a"
        speed = f"**{theirs_time / ours_time:.1f}x**" if ours_time and theirs_time else "n/a"
        rows.append(f"| {n} | env steps/s | {ours_rate or 0:,.0f} | {theirs_rate or 0:,.0f} | {rate} |")
        rows.append(f"| {n} | seconds to 450 for every policy | {ours_time or 0:.0f} | {theirs_time or 0:.0f} | {speed} |")
    return "\n".join(rows)


def main() -> None:
    """Every library, agent count and seed, each in a fresh process; writes the JSON and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args, rest = parser.parse_known_args()
    if rest[:1] == ["_child"]:
        os.environ.setdefault("CORRAL_RESULTS_DIR", "/tmp/corral_bench_results")
        library, num_agents, seed = rest[1], int(rest[2]), int(rest[3])
        run = run_corral if library == "corral" else run_rllib
        print("RESULT " + json.dumps(run(num_agents, seed)), flush=True)
        return
    results: dict[str, list[dict[str, Any]]] = {"load_average_at_start": [{"1min": os.getloadavg()[0]}]}
    for n in args.agents:
        for library in ("corral", "rllib"):
            for seed in args.seeds:
                outcome = measure(library, n, seed)
                summary = {k: v for k, v in outcome.items() if k != "history"}
                print(f"{library} {n} agents seed {seed}: {summary}", flush=True)
                results.setdefault(f"{library} {n}", []).append({"seed": seed, **outcome})
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "rllib_multi_agent.json").write_text(json.dumps(results, indent=1))
    print(table(results, args.agents))


if __name__ == "__main__":
    main()

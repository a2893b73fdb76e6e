"""Each built-in algorithm's plain defaults learn its benchmark env within RLlib's budgets, on one seed.

The config is ``corral.get_config(NAME).environment(ENV).debugging(seed=0)`` and
nothing else: what a user who changes no setting gets. The mean return over
the last ``window`` episodes (from ``hist_stats``) must reach the reward by the
end of an iteration that ends within the budget of env steps. CartPole's window
is RLlib's 100 episodes (``episode_reward_mean`` itself); Pendulum's is 10,
because its 200-step episodes leave only 50 within 10k steps, the first of
them random.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import pytest

import corral

CASES = [
    # name, env, reward, env-step budget, window
    ("PPO", "CartPole-v1", 475.0, 100_000, 100),
    ("A2C", "CartPole-v1", 475.0, 500_000, 100),
    ("DQN", "CartPole-v1", 475.0, 100_000, 100),
    ("SAC", "Pendulum-v1", -200.0, 10_000, 10),
    ("IMPALA", "CartPole-v1", 400.0, 500_000, 100),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, env, reward, budget, window", CASES, ids=[case[0] for case in CASES])
def test_plain_defaults_reach_the_reward_within_the_budget(
    make_algo: Callable[..., Any], name: str, env: str, reward: float, budget: int, window: int
) -> None:
    algo = make_algo(corral.get_config(name).environment(env).debugging(seed=0))
    best = float("-inf")
    while algo.counters["num_env_steps_sampled"] < budget:
        result = algo.train()
        returns = result["hist_stats"]["episode_reward"][-window:]
        if len(returns) < window:
            continue
        mean = statistics.fmean(returns)
        if mean >= reward and result["timesteps_total"] <= budget:
            return
        best = max(best, mean)
    pytest.fail(
        f"{name}'s defaults reached a {window}-episode mean of {best:.1f} on {env}, not {reward}, within {budget:,} steps"
    )

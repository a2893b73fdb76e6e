"""Self-play with a league of frozen snapshots, on PettingZoo's tic-tac-toe.

One policy, ``main``, learns. Its opponent in each game is drawn from a pool
that starts with a uniformly random player; whenever ``main`` wins often
enough, a frozen copy of it joins the pool (``algo.add_policy`` with its
state), so it keeps meeting stronger versions of itself. The game's action
mask keeps every player to legal moves.

Needs the PettingZoo extra and pygame (which PettingZoo's classic games import)::

    pip install "corral[pettingzoo]" pygame
    python examples/self_play.py --iterations 60
"""

from __future__ import annotations

import argparse
import random
from typing import Any

import numpy as np

import corral
from corral import PettingZooEnv, PolicySpec, RandomPolicy

MAIN = "main"
"""the policy that learns"""


def tic_tac_toe(env_config: Any = None) -> PettingZooEnv:
    """The turn-based game, as a corral multi-agent env; its observations hold the legal moves (``action_mask``)."""
    from pettingzoo.classic import tictactoe_v3

    return PettingZooEnv(tictactoe_v3.env())


def main_side(episode: Any) -> str:
    """Which player ``main`` is in this game: the first in even-numbered episodes, the second in odd ones."""
    return "player_1" if episode.episode_id % 2 == 0 else "player_2"


def main_against_the_pool(agent_id: str, episode: Any, worker: Any = None, **kwargs: Any) -> str:
    """``main`` plays its side; the other side is a policy drawn from the pool (every policy but ``main``).

    The pool is read from the env runner's config, which ``add_policy`` updates in every runner.
    """
    if agent_id == main_side(episode):
        return MAIN
    pool = sorted(pid for pid in worker.config.policies if pid != MAIN)
    return random.Random(episode.episode_id).choice(pool)


class League(corral.DefaultCallbacks):
    """Counts ``main``'s wins, and adds a frozen snapshot of it to the pool whenever it wins often enough."""

    snapshot_win_rate = 0.8
    """the share of recent games ``main`` must win before its snapshot joins the pool"""

    def on_episode_end(self, *, episode: Any, **kwargs: Any) -> None:
        """Record whether ``main`` won the game (it scored +1)."""
        main_reward = sum(reward for (_, pid), reward in episode.agent_rewards.items() if pid == MAIN)
        episode.custom_metrics["main_won"] = float(main_reward > 0)

    def on_train_result(self, *, algorithm: Any, result: dict[str, Any], **kwargs: Any) -> None:
        """Snapshot ``main`` into the pool when its recent win rate reaches :attr:`snapshot_win_rate`."""
        win_rate = result["custom_metrics"].get("main_won_mean", 0.0)
        if win_rate >= self.snapshot_win_rate:
            snapshot = f"main_v{sum(pid.startswith('main_v') for pid in algorithm.policies) + 1}"
            algorithm.add_policy(snapshot, policy_state=algorithm.get_policy(MAIN).get_state(), policies_to_train=[MAIN])
            print(f"main wins {win_rate:.0%} of its recent games: {snapshot} joins the pool")
        result["league_size"] = len(algorithm.policies) - 1


def self_play_config(snapshot_win_rate: float = 0.8, storage_path: str | None = None) -> Any:
    """PPO on tic-tac-toe: ``main`` learns against the pool, which starts as one random player."""
    league = type("League", (League,), {"snapshot_win_rate": snapshot_win_rate})
    return (
        corral.get_config("PPO")
        .environment(tic_tac_toe)
        .training(lr=1e-3, train_batch_size=2000, minibatch_size=256, num_epochs=10, entropy_coeff=0.01)
        .multi_agent(
            policies={MAIN: PolicySpec(), "random": PolicySpec(policy_class=RandomPolicy)},
            policy_mapping_fn=main_against_the_pool,
            policies_to_train=[MAIN],
        )
        .callbacks(league)
        # about one iteration's games: the win rate that decides a snapshot is a recent one
        .reporting(metrics_num_episodes_for_smoothing=200, storage_path=storage_path)
        .debugging(seed=0)
    )


def win_rate_against_random(policy: corral.Policy, games: int = 200, seed: int = 0) -> float:
    """The share of ``games`` that ``policy`` (acting greedily) wins against uniformly random legal moves.

    It plays first in even-numbered games and second in odd ones.
    """
    env = tic_tac_toe()
    rng = np.random.default_rng(seed)
    wins = 0
    for game in range(games):
        side = "player_1" if game % 2 == 0 else "player_2"
        observations, _ = env.reset(seed=seed + game)
        while True:
            actions = {
                agent: policy.compute_single_action(obs, explore=False)[0]
                if agent == side
                else int(rng.choice(np.flatnonzero(obs["action_mask"])))
                for agent, obs in observations.items()
            }
            observations, rewards, terminateds, truncateds, _ = env.step(actions)
            if terminateds["__all__"] or truncateds["__all__"]:
                wins += rewards.get(side, 0.0) > 0
                break
    env.close()
    return wins / games


def main(iterations: int = 60, snapshot_win_rate: float = 0.8, storage_path: str | None = None) -> tuple[Any, float]:
    """Train ``main`` in the league; returns the algorithm and ``main``'s win rate against a random player."""
    algo = self_play_config(snapshot_win_rate, storage_path).build()
    for _ in range(iterations):
        result = algo.train()
        print(
            f"iteration {result['training_iteration']:3d}  steps {result['timesteps_total']:7d}  "
            f"main wins {result['custom_metrics'].get('main_won_mean', 0.0):.0%}  pool {result['league_size']}"
        )
    win_rate = win_rate_against_random(algo.get_policy(MAIN))
    print(f"main against a random player: wins {win_rate:.0%} of 200 games")
    return algo, win_rate


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--snapshot-win-rate", type=float, default=0.8)
    parser.add_argument("--storage-path", default=None, help="where results go (default: ~/corral_results)")
    args = parser.parse_args()
    algo, _ = main(args.iterations, args.snapshot_win_rate, args.storage_path)
    algo.stop()

"""Writes the small offline datasets that the offline tuned examples and tests read, into the package.

    python tests/data/offline/make_datasets.py

They ship with corral (``corral/tuned_examples/data/``), so ``corral train -f
bc_cartpole`` finds them from any working folder:

- ``cartpole_expert.parquet``: 10,000 rows of a PPO policy trained to a mean
  return of 475 on CartPole-v1, acting greedily (20 episodes of 500 steps).
- ``cartpole_random.parquet``: 10,000 rows of an untrained PPO policy (close to
  uniformly random actions; episodes of about 20 steps).
- ``pendulum_sac.parquet``: every transition SAC sampled while learning
  Pendulum-v1 from scratch for 12,000 env steps (from random to good: returns
  of about -1,400 rising to about -150), actions normalized to [-1, 1].

Each is what ``offline_data(output=...)`` writes, copied out of the run's folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import corral

DATA = Path(__file__).parent.parent.parent.parent / "corral" / "tuned_examples" / "data"


def record(config: corral.AlgorithmConfig, rows: int, name: str, weights: dict | None = None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        algo = config.copy().offline_data(output=folder).build()
        if weights is not None:
            algo.set_weights(weights)
        recorded = 0
        while recorded < rows:
            recorded += algo.sample().env_steps
        algo.stop()
        (written,) = Path(folder).glob("*.parquet")
        shutil.copy(written, DATA / name)
        print(f"{name}: {recorded} rows, {os.path.getsize(DATA / name):,} bytes")


def main() -> None:
    os.environ.setdefault("CORRAL_RESULTS_DIR", tempfile.mkdtemp())
    cartpole = (
        corral.get_config("PPO")
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=16)
        .training(train_batch_size=4096, minibatch_size=512, lr=0.002, lambda_=0.95, kl_coeff=0.0)
        .training(model={"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"})
        .debugging(seed=0)
    )
    expert = cartpole.build()
    while expert.train()["episode_reward_mean"] < 475:
        pass
    weights = expert.get_weights()
    expert.stop()
    one_env = cartpole.copy().env_runners(num_envs_per_env_runner=1, rollout_fragment_length=500)
    record(one_env.copy().exploration(explore=False), 10_000, "cartpole_expert.parquet", weights)
    record(one_env, 10_000, "cartpole_random.parquet")

    sac = corral.get_config("SAC").environment("Pendulum-v1").debugging(seed=0)
    sac = sac.training(train_batch_size=128, training_intensity=128, learning_starts=100, actor_lr=1e-3, critic_lr=1e-3)
    sac = sac.training(alpha_lr=1e-3, model={"fcnet_hiddens": [64, 64]})
    with tempfile.TemporaryDirectory() as folder:
        algo = sac.copy().offline_data(output=folder).update_from_dict({"min_sample_timesteps_per_iteration": 200}).build()
        while algo.counters["num_env_steps_sampled"] < 12_000:
            result = algo.train()
        print("SAC's last mean return:", result["episode_reward_mean"])
        algo.stop()
        (written,) = Path(folder).glob("*.parquet")
        shutil.copy(written, DATA / "pendulum_sac.parquet")
        print(f"pendulum_sac.parquet: {os.path.getsize(DATA / 'pendulum_sac.parquet'):,} bytes")


if __name__ == "__main__":
    main()

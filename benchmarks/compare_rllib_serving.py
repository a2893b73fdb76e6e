"""corral against RLlib: env steps per second through one policy server, with 1, 4 and 8 clients, as ratios.

RLlib's CartPole server and client pattern, the same for both libraries:

- The server is PPO with ``env=None`` and the spaces given, its env runner's
  input a ``PolicyServerInput`` on localhost, ``num_env_runners=0``.
- Each client is a process of its own playing CartPole-v1 with the library's
  ``PolicyClient``: ``start_episode``, then ``get_action`` and
  ``log_returns`` per step, ``end_episode``; in remote inference mode (the
  server acts) and in local mode (a copy of the policy acts in the client,
  pulling weights every 10 s, RLlib's default).

Training is kept cheap and alike so that the server's answering is what is
measured: fragments and batches of 1,000 steps, 1 epoch of minibatches of
128, a 64x64 tanh MLP. After one warm-up iteration, steps per second are
counted over whole ``train()`` iterations for ``--seconds``.

corral serves JSON checked against the spaces; RLlib's server unpickles what
its clients send. RLlib's ``PolicyServerInput`` left RLlib after its old API
stack (it is not in Ray 2.60), so RLlib runs as released in Ray 2.9.0, in a
virtual environment of its own (``--rllib-python``)::

    python -m venv /tmp/rl29
    /tmp/rl29/bin/pip install torch "ray[rllib]==2.9.0" "numpy<2" "gymnasium==0.28.1"
    python benchmarks/compare_rllib_serving.py --rllib-python /tmp/rl29/bin/python

Writes benchmarks/results/rllib_serving.json.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLIENTS = (1, 4, 8)
FRAGMENT = 1000


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def client(library: str, port: int, seed: int, mode: str) -> None:
    """Play CartPole against the server forever, the way RLlib's cartpole_client.py does."""
    import gymnasium as gym

    if library == "corral":
        from corral import PolicyClient
    else:
        from ray.rllib.env.policy_client import PolicyClient
    policy_client = PolicyClient(f"http://localhost:{port}", inference_mode=mode)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    episode = policy_client.start_episode()
    while True:
        obs, reward, terminated, truncated, _ = env.step(policy_client.get_action(episode, obs))
        policy_client.log_returns(episode, reward)
        if terminated or truncated:
            policy_client.end_episode(episode, obs)
            obs, _ = env.reset()
            episode = policy_client.start_episode()


def server(library: str, port: int) -> Any:
    """The library's PPO with a PolicyServerInput on ``port``."""
    import gymnasium as gym

    spaces = {"observation_space": gym.spaces.Box(float("-inf"), float("inf"), (4,)), "action_space": gym.spaces.Discrete(2)}
    model = {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"}
    if library == "corral":
        from corral import PolicyServerInput
        from corral.plugins.ppo import PPOConfig

        corral_config = (
            PPOConfig()
            .environment(env=None, **spaces)
            .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "localhost", port))
            .env_runners(num_env_runners=0, rollout_fragment_length=FRAGMENT)
            .training(train_batch_size=FRAGMENT, minibatch_size=128, num_epochs=1, model=model)
            .reporting(log_to_tensorboard=False)
        )
        return corral_config.build()
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig as RLlibPPOConfig
    from ray.rllib.env.policy_server_input import PolicyServerInput as RLlibServer

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    rllib_config = (
        RLlibPPOConfig()
        .environment(env=None, **spaces)
        .framework("torch")
        .offline_data(input_=lambda ioctx: RLlibServer(ioctx, "localhost", port))
        .rollouts(num_rollout_workers=0, enable_connectors=False, rollout_fragment_length=FRAGMENT)
        .evaluation(off_policy_estimation_methods={})
        .training(train_batch_size=FRAGMENT, sgd_minibatch_size=128, num_sgd_iter=1, model=model)
    )
    return rllib_config.build()


def measure(library: str, mode: str, clients: int, seconds: float) -> dict[str, Any]:
    """Steps per second over whole iterations, after one warm-up, with ``clients`` client processes in ``mode``."""
    port = free_port()
    algo = server(library, port)
    command = [sys.executable, __file__, "--client", library, str(port)]
    players = [subprocess.Popen([*command, str(seed), mode]) for seed in range(clients)]
    try:
        before = algo.train()["timesteps_total"]
        start = time.perf_counter()
        steps = 0
        while time.perf_counter() - start < seconds:
            steps = algo.train()["timesteps_total"] - before
        elapsed = time.perf_counter() - start
    finally:
        for player in players:
            player.kill()
            player.wait()
        algo.stop()
    return {
        "library": library,
        "mode": mode,
        "clients": clients,
        "steps": steps,
        "seconds": elapsed,
        "steps_per_s": steps / elapsed,
    }


def main() -> None:
    """Run every library at every client count, each in a fresh process, and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rllib-python", help="a Python with ray[rllib]==2.9.0 installed")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--client", nargs=4, metavar=("LIBRARY", "PORT", "SEED", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--one", nargs=3, metavar=("LIBRARY", "MODE", "CLIENTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client[0], int(args.client[1]), int(args.client[2]), args.client[3])
        return
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1], int(args.one[2]), args.seconds)))
        return
    runs = []
    for mode in ("remote", "local"):
        for clients in CLIENTS:
            for library, python in (("corral", sys.executable), ("rllib", args.rllib_python)):
                if python is None:
                    continue
                command = [python, __file__, "--one", library, mode, str(clients), "--seconds", str(args.seconds)]
                output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=HERE.parent).stdout
                runs.append(json.loads(output.strip().splitlines()[-1]))
                print(runs[-1], flush=True)
    results = HERE / "results" / "rllib_serving.json"
    results.write_text(json.dumps({"fragment": FRAGMENT, "seconds": args.seconds, "runs": runs}, indent=1) + "\n")
    for mode in ("remote", "local"):
        for clients in CLIENTS:
            rate = {run["library"]: run["steps_per_s"] for run in runs if (run["mode"], run["clients"]) == (mode, clients)}
            if len(rate) == 2:
                ratio = rate["corral"] / rate["rllib"]
                print(
                    f"{mode}, {clients} clients: corral {rate['corral']:,.0f} steps/s, RLlib {rate['rllib']:,.0f}: {ratio:.1f}x"
                )


if __name__ == "__main__":
    main()

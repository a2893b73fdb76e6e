"""RLlib's CartPole client pattern, run by the serving tests as a process of its own.

``python cartpole_client.py PORT SEED [STEPS] [MODE]``: plays CartPole against the
policy server at PORT for STEPS steps (forever if 0), its actions from the
server (MODE ``remote``, the default) or from a copy of the policy that pulls
the server's weights every second (``local``), then ends its episode and
prints the steps and episodes it played.
"""

from __future__ import annotations

import sys

import gymnasium as gym

from corral.integrations.serving.policy_client import PolicyClient


def main(port: int, seed: int, steps: int, mode: str) -> None:
    client = PolicyClient(f"http://localhost:{port}", inference_mode=mode, update_interval=1.0)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    played = episodes = 0
    episode = client.start_episode()
    while steps == 0 or played < steps:
        obs, reward, terminated, truncated, _ = env.step(client.get_action(episode, obs))
        client.log_returns(episode, float(reward))
        played += 1
        if terminated or truncated:
            client.end_episode(episode, obs)
            episodes += 1
            obs, _ = env.reset()
            episode = client.start_episode()
    client.end_episode(episode, obs)
    client.close()
    print(played, episodes + 1, flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0, (sys.argv[4:] or ["remote"])[0])

"""``corral serve``: a training run from the command line whose episodes clients play through its policy server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import pytest

from corral.cli import main
from corral.core.common.space_codec import decode_space
from corral.core.sampling.external.io_context import IOContext
from corral.integrations.serving import policy_server_input
from corral.integrations.serving.policy_client import PolicyClient
from corral.integrations.serving.protocol import ProtocolError

TINY = '{"train_batch_size": 200, "minibatch_size": 64, "num_epochs": 1, "rollout_fragment_length": 200}'


def play_until_stopped(address: str, token: str, played: list[int]) -> None:
    """RLlib's CartPole client, remote inference, until the server goes away (counting the steps in ``played``)."""
    client = PolicyClient(address, inference_mode="remote", auth_token=token, max_retry_s=2.0)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    try:
        episode = client.start_episode()
        while True:
            obs, reward, terminated, truncated, _ = env.step(client.get_action(episode, obs))
            played[0] += 1
            client.log_returns(episode, float(reward))
            if terminated or truncated:
                client.end_episode(episode, obs)
                obs, _ = env.reset()
                episode = client.start_episode()
    except (ConnectionError, ProtocolError):  # the run reached its stop and closed its server
        pass


def play_two_poles_until_stopped(address: str, token: str, played: list[int]) -> None:
    """Two agents (0 and 1), each balancing its own CartPole, in multi-agent episodes through a remote PolicyClient."""
    client = PolicyClient(address, inference_mode="remote", auth_token=token, max_retry_s=2.0)
    poles = {agent: gym.make("CartPole-v1") for agent in (0, 1)}
    try:
        while True:
            episode = client.start_episode()
            observations = {agent: pole.reset(seed=played[0] + agent)[0] for agent, pole in poles.items()}
            while observations:
                actions = client.get_action(episode, observations)
                assert set(actions) == set(observations)  # by the application's own agent ids
                rewards, done, next_observations = {}, {}, {}
                for agent, action in actions.items():
                    obs, rewards[agent], terminated, truncated, _ = poles[agent].step(action)
                    played[0] += 1
                    if terminated or truncated:
                        done[agent] = True
                    else:
                        next_observations[agent] = obs
                client.log_returns(episode, rewards, None, done or None)
                observations = next_observations
            client.end_episode(episode, {})
    except (ConnectionError, ProtocolError):  # the run reached its stop and closed its server
        pass


def serve(results_dir: Path, *args: str, token: str = "", player: Any = play_until_stopped) -> tuple[int, str, int]:
    """Run ``corral serve ARGS`` with a client (``player``) playing against it until it stops.

    Returns:
        The exit status, the output and the steps the client played.
    """
    env = {**os.environ, "CORRAL_RESULTS_DIR": str(results_dir), "PYTHONUNBUFFERED": "1", "CORRAL_AUTH_TOKEN": token}
    command = [sys.executable, "-m", "corral.cli", "serve", *args]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    played = [0]
    try:
        address = announced_address(server)
        if token:
            with pytest.raises(ProtocolError, match=r"\(401\)"):
                PolicyClient(address, inference_mode="remote", max_retry_s=2.0).start_episode()
        client = threading.Thread(target=player, args=(address, token, played))
        client.start()
        output, _ = server.communicate(timeout=300)
        client.join(timeout=60)
    finally:
        server.kill()
    return server.returncode, output, played[0]


def announced_address(server: subprocess.Popen[str]) -> str:
    """The address the command prints before it waits for episodes."""
    assert server.stdout is not None
    lines = []
    for line in server.stdout:
        lines.append(line)
        found = re.search(r"serving PPO at (http://127\.0\.0\.1:\d+)", line)
        if found:
            return found[1]
    server.wait(timeout=30)
    pytest.fail(f"corral serve printed no address: {''.join(lines)}")


@pytest.mark.slow
def test_corral_serve_trains_on_what_a_client_plays_and_its_checkpoint_evaluates_and_resumes(
    results_dir: Path, capsys: Any
) -> None:
    status, output, played = serve(
        results_dir, "--algo", "PPO", "--env", "CartPole-v1", "--port", "0", "--stop", '{"timesteps_total": 400}',
        "--config", TINY, "--seed", "0", token="s3cret",
    )  # fmt: skip
    assert status == 0, output
    assert "stopped: timesteps_total budget 400 reached at iteration 2, 400 env steps" in output
    assert played >= 400
    checkpoint = re.search(r"last checkpoint: (\S+)", output)
    assert checkpoint is not None, output
    saved = json.loads((Path(checkpoint[1]) / "config.json").read_text())
    assert saved["env"] is None and saved["evaluation_config"]["env"] == "CartPole-v1"
    assert saved["num_envs_per_env_runner"] == 8  # corral's default, which a served runner takes as 1

    assert main(["evaluate", checkpoint[1], "--episodes", "1"]) == 0  # in the env that gave the spaces
    assert re.search(r"1 episodes: reward mean \d", capsys.readouterr().out)

    status, output, _ = serve(results_dir, "--resume", checkpoint[1], "--port", "0", "--stop", '{"timesteps_total": 600}')
    assert status == 0, output
    assert "stopped: timesteps_total budget 600 reached at iteration 3" in output


@pytest.mark.slow
def test_corral_serve_with_a_multi_agent_config_trains_each_policy_on_its_agents(results_dir: Path, capsys: Any) -> None:
    multi_agent = {
        "env_config": {"num_agents": 2},
        "policies": ["p0", "p1"],
        "policy_mapping_fn": "corral.core.contracts.multi_agent_config:policy_per_agent",
        **json.loads(TINY),
    }
    status, output, played = serve(
        results_dir, "--algo", "PPO", "--env", "corral.testing.envs:MultiAgentCartPole", "--port", "0",
        "--stop", '{"timesteps_total": 400}', "--config", json.dumps(multi_agent), "--seed", "0",
        player=play_two_poles_until_stopped,
    )  # fmt: skip
    assert status == 0, output
    assert played >= 400
    assert re.search(r"results: \S+/PPO_None_", output)  # no env is stepped, as RLlib's folders say
    assert "stopped: timesteps_total budget 400 reached at iteration 2" in output
    checkpoint = re.search(r"last checkpoint: (\S+)", output)
    assert checkpoint is not None, output
    saved = json.loads((Path(checkpoint[1]) / "config.json").read_text())
    cart_pole = gym.make("CartPole-v1")
    for policy in ("p0", "p1"):  # each policy's spaces, from the agent the mapping gives it
        spec = saved["policies"][policy]
        assert decode_space(spec["observation_space"], "") == cart_pole.observation_space
        assert decode_space(spec["action_space"], "") == cart_pole.action_space
    assert main(["evaluate", checkpoint[1], "--episodes", "1"]) == 0  # in the multi-agent env that gave the spaces
    assert re.search(r"1 episodes: reward mean \d", capsys.readouterr().out)


def test_policy_servers_put_a_server_on_each_sampling_runner_by_rllib_s_port_convention(monkeypatch: Any) -> None:
    made: list[tuple[int, int, dict[str, Any]]] = []

    def server(ioctx: Any, address: str, port: int, **options: Any) -> str:
        made.append((ioctx.worker_index, port, options))
        return f"{address}:{port}"

    monkeypatch.setattr(policy_server_input, "PolicyServerInput", server)
    make = policy_server_input.policy_servers("localhost", 9900, auth_token="t")
    local_alone = IOContext(worker_index=0, worker=SimpleNamespace(num_workers=0))
    assert make(local_alone) == "localhost:9900"
    assert make(IOContext(worker_index=0, worker=SimpleNamespace(num_workers=2))) is None  # it samples nothing
    assert [make(IOContext(worker_index=i, worker=SimpleNamespace(num_workers=2))) for i in (1, 2)] == [
        "localhost:9900",
        "localhost:9901",
    ]
    assert policy_server_input.policy_servers("localhost", 0)(local_alone) == "localhost:0"  # free ports, whatever runs
    assert [options for _, _, options in made[:3]] == [{"auth_token": "t"}] * 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], r"--port 70000 is not a port: give 1-65535, or 0"),
        (["--episode-timeout", "0"], r"--episode-timeout 0 must be a number of seconds above 0"),
        (
            ["--env", "corral.testing.envs:MultiAgentCartPole"],
            r"'corral.testing.envs:MultiAgentCartPole' is a multi-agent env but the config has no policy_mapping_fn",
        ),
        (
            [
                "--config",
                '{"policies": ["p0", "p1"], "policy_mapping_fn": "corral.core.contracts.multi_agent_config:policy_per_agent"}',
            ],
            r"the config is multi-agent \(policies \['p0', 'p1'\]\) but 'CartPole-v1' is a single-agent env",
        ),
        (["--env", "NoSuchEnv-v0"], r"unknown environment 'NoSuchEnv-v0'"),
    ],
)
def test_corral_serve_refuses_bad_flags_before_it_serves(args: list[str], message: str, capsys: Any) -> None:
    flags = {"--algo": "PPO", "--env": "CartPole-v1", "--port": "0"}
    flags.update(zip(args[::2], args[1::2], strict=True))
    assert main(["serve", *[part for pair in flags.items() for part in pair]]) == 2
    assert re.search(message, capsys.readouterr().err)

"""``corral serve``: a training run whose episodes are played by external applications through policy servers.

It takes ``corral train``'s flags and experiment files. The experiment's env
is not stepped: it gives the spaces the applications observe and act in
(and the env that evaluation, if the config asks for it, runs in). Each env
runner that samples listens at ``--address``/``--port`` by RLlib's
convention (:func:`~corral.integrations.serving.policy_server_input.policy_servers`),
and the command prints where before it waits for the first episodes. Clients
are :class:`~corral.integrations.serving.policy_client.PolicyClient` objects.

The shared token is read from ``$CORRAL_AUTH_TOKEN``, not from a flag: a
command line is visible to every user of the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from corral.cli.train import _train, add_run_flags
from corral.errors import ConfigError

TOKEN_VARIABLE = "CORRAL_AUTH_TOKEN"
"""the environment variable ``corral serve`` reads the servers' shared token from"""


def add_parser(sub: Any) -> None:
    """The ``serve`` command's flags: ``corral train``'s, and where to listen."""
    serve = sub.add_parser(
        "serve",
        help="train on episodes that external applications play through policy servers (PolicyClient)",
        description="Train on episodes that applications play through policy servers. --env only gives the spaces "
        "the applications observe and act in (and the env evaluation runs in, if the config evaluates). Clients connect "
        "with corral.PolicyClient at the address printed; with $CORRAL_AUTH_TOKEN set, they must send that token.",
    )
    add_run_flags(serve, env_help="the env whose observation and action spaces the applications use (it is not stepped)")
    serve.add_argument(
        "--address", default="localhost", help="the interface the servers bind (default localhost; 0.0.0.0: the network)"
    )
    serve.add_argument(
        "--port",
        type=int,
        default=9900,
        help="the first server's port (default 9900); with N remote env runners they listen on PORT..PORT+N-1; "
        "0 picks free ports",
    )
    serve.add_argument(
        "--episode-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="drop an episode whose client is silent this long (default 60)",
    )
    serve.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a port: give 1-65535, or 0 for free ones")
    if args.episode_timeout is not None and not args.episode_timeout > 0:
        raise ConfigError(f"--episode-timeout {args.episode_timeout:g} must be a number of seconds above 0")
    args.serving = Serving(args.address, args.port, os.environ.get(TOKEN_VARIABLE) or None, args.episode_timeout)
    return _train(args)


@dataclasses.dataclass(frozen=True)
class Serving:
    """How ``corral serve`` turns a training run's config into a served one, and says where it listens.

    Args:
        address: the interface the servers bind.
        port: the first server's port (0: free ones).
        auth_token: the token clients must send, if any.
        episode_timeout_s: PolicyServerInput's ``episode_timeout_s``; None: its default.
    """

    address: str
    port: int
    auth_token: str | None = None
    episode_timeout_s: float | None = None

    def overrides(self) -> dict[str, Any]:
        """The options that make env runners serve: ``input_`` puts a PolicyServerInput on each that samples."""
        from corral.integrations.serving.policy_server_input import policy_servers

        options: dict[str, Any] = {"auth_token": self.auth_token}
        if self.episode_timeout_s is not None:
            options["episode_timeout_s"] = self.episode_timeout_s
        return {"input_": policy_servers(self.address, self.port, **options)}

    def configure(self, config: Any) -> Any:
        """The config served: no env stepped, its spaces given, servers as ``input_``, evaluation in the env named.

        Args:
            config: the experiment's config, validated, with the env that gives the spaces.

        Returns:
            The served config, validated.

        Raises:
            ConfigError: the env is multi-agent, or its spaces cannot be served as JSON.
        """
        observation_space, action_space = _spaces(config)
        env = config.env
        config.environment(env=None, observation_space=observation_space, action_space=action_space)
        config.evaluation(evaluation_config={"env": env, **config.evaluation_config})
        config.update_from_dict(self.overrides())
        config.validate()
        return config

    def announce(self, algo: Any) -> str:
        """The line that says where clients reach the run's servers.

        Args:
            algo: the built algorithm (its servers are listening).

        Returns:
            ``serving PPO at http://127.0.0.1:9900 (PolicyClient(address))``.
        """
        from corral.integrations.serving.policy_server_input import server_address

        found = algo.env_runner_group.foreach_env_runner(server_address)
        addresses = ", ".join(a for a in found if a is not None) or "no address (no env runner serves)"
        token = f"; clients send the token in ${TOKEN_VARIABLE}" if self.auth_token else ""
        return f"serving {algo.config.algo_class.name} at {addresses}: clients connect with PolicyClient(address){token}"


def _spaces(config: Any) -> tuple[Any, Any]:
    """The observation and action spaces the config gives, else its env's (made once, then closed)."""
    if config.observation_space is not None and config.action_space is not None:
        return config.observation_space, config.action_space
    import gymnasium as gym

    from corral.core.environments.env_creators import EnvContext, resolve_creator
    from corral.core.environments.multi_agent_env import MultiAgentEnv

    gymnasium_id, creator = resolve_creator(config.env)
    env = gym.make(gymnasium_id, **config.env_config) if gymnasium_id else creator(EnvContext(config.env_config))  # type: ignore[misc]
    try:
        if isinstance(env, MultiAgentEnv):
            raise ConfigError(
                f"corral serve serves single-agent episodes; {config.env!r} is a multi-agent env: give a single-agent env "
                "for the spaces"
            )
        return config.observation_space or env.observation_space, config.action_space or env.action_space
    finally:
        env.close()

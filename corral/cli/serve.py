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
from typing import Any, cast

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

        A multi-agent config (its ``policies`` and ``policy_mapping_fn``) serves
        multi-agent episodes (clients send values by agent id); each policy's
        spaces are its agents' in the env, as the mapping picks them for the ids
        clients send (strings).

        Args:
            config: the experiment's config, validated, with the env that gives the spaces.

        Returns:
            The served config, validated.

        Raises:
            ConfigError: a multi-agent env without a multi-agent config (or the reverse),
                or spaces that cannot be served as JSON.
        """
        env = config.env
        config.update_from_dict(_served_spaces(config))
        config.environment(env=None)
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


def _served_spaces(config: Any) -> dict[str, Any]:
    """The options that give the served policies their spaces: the config's own, else the env's (made once, then closed).

    Returns:
        ``observation_space`` and ``action_space``; for a multi-agent config, ``policies`` with each spec's spaces.
    """
    from corral.core.common.sample_batch import DEFAULT_POLICY_ID
    from corral.core.contracts.policy_spec import PolicySpec

    specs = config.policies or {DEFAULT_POLICY_ID: PolicySpec()}  # as the runners take a mapping without policies
    if config.is_multi_agent and all(s.observation_space is not None and s.action_space is not None for s in specs.values()):
        return {}
    if not config.is_multi_agent and config.observation_space is not None and config.action_space is not None:
        return {}
    from corral.core.environments.envs import one_sub_environment
    from corral.core.environments.multi_agent_env import MultiAgentEnv

    env = one_sub_environment(config)
    try:
        if isinstance(env, MultiAgentEnv) != bool(config.is_multi_agent):
            raise ConfigError(
                f"{config.env!r} is a multi-agent env but the config has no policy_mapping_fn: clients of a multi-agent "
                "env play multi-agent episodes, so give the policies and which agent each serves (say, policies: "
                "[p0, p1] and policy_mapping_fn: corral.core.contracts.multi_agent_config:policy_per_agent)"
                if isinstance(env, MultiAgentEnv)
                else f"the config is multi-agent (policies {sorted(specs)}) but {config.env!r} is a single-agent env: "
                "give a multi-agent env for the agents' spaces, or each PolicySpec's spaces"
            )
        if not config.is_multi_agent:
            return {
                "observation_space": config.observation_space or env.observation_space,
                "action_space": config.action_space or env.action_space,
            }
        from corral.core.sampling.agent_policies import infer_policy_spaces, map_agent
        from corral.core.sampling.external.external_env_runner import ExternalMultiAgentEpisode

        probe = ExternalMultiAgentEpisode(cast(Any, None), -1, "")  # what a mapping may read; no runner yet
        spaces = infer_policy_spaces(
            env, specs, lambda agent: map_agent(config.policy_mapping_fn, str(agent), probe, specs, None)
        )
        return {
            "policies": {
                pid: dataclasses.replace(specs[pid], observation_space=o, action_space=a) for pid, (o, a) in spaces.items()
            }
        }
    finally:
        env.close()

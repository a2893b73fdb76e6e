"""RLlib's ``PolicyServerInput``: an env runner's ExternalEnv whose episodes are played by clients over HTTP.

RLlib's server scripts keep working as they are written::

    config.environment(env=None, observation_space=..., action_space=...)
    config.offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "localhost", 9900 + ioctx.worker_index))

Each env runner the function is called for listens on its own port; a
:class:`~corral.integrations.serving.policy_client.PolicyClient` (or anything
that speaks :mod:`~corral.integrations.serving.protocol`) plays episodes
against it, and the runner trains on them like on any
:class:`~corral.core.environments.external_env.ExternalEnv`'s.

What the network sends is checked before it is used, never unpickled:
observations and actions against the policy's spaces, every field by the
protocol. An episode whose client goes silent for ``episode_timeout_s``
(without waiting for an action) is dropped and counted in the results
(``external/episodes_dropped``); a client that comes back with it gets 404.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from corral.core.common import by_value, state_codec
from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.core.common.space_codec import encode_space
from corral.core.environments.external_env import ExternalEnv
from corral.core.environments.multi_agent_env import ALL_AGENTS
from corral.core.sampling.agent_policies import map_agent
from corral.core.sampling.external.external_env_runner import ExternalMultiAgentEpisode, external_policy_spaces
from corral.errors import ConfigError, EnvError
from corral.integrations.serving import protocol
from corral.integrations.serving.http_server import PolicyHTTPServer
from corral.integrations.serving.protocol import ProtocolError, Request, space_value

logger = logging.getLogger("corral")

DEFAULT_EPISODE_TIMEOUT_S = 60.0
"""how long an episode's client may be silent (not waiting for an action) before the episode is dropped"""


class PolicyServerInput(ExternalEnv):
    """An ExternalEnv served over HTTP: clients start episodes, ask for actions or log their own, and end them.

    Args:
        ioctx: the :class:`~corral.core.sampling.external.io_context.IOContext` it is made for (its config gives the
            spaces).
        address: the interface to bind: ``"localhost"`` (127.0.0.1) unless the network is meant to reach it.
        port: the port; 0 picks a free one (:attr:`port` says which).
        auth_token: when given, every request must carry ``Authorization: Bearer <token>``.
        episode_timeout_s: how long an episode's client may be silent before the episode is dropped.
        max_request_bytes: the largest request body read.
        max_concurrent: how many episodes may run at once.

    Raises:
        ConfigError: the config gives no observation or action space, or one a client cannot send as JSON.
        OSError: the address cannot be bound (the port is taken, say).
    """

    def __init__(
        self,
        ioctx: Any,
        address: str = "localhost",
        port: int = 9900,
        *,
        auth_token: str | None = None,
        episode_timeout_s: float = DEFAULT_EPISODE_TIMEOUT_S,
        max_request_bytes: int = protocol.DEFAULT_MAX_REQUEST_BYTES,
        max_concurrent: int = 1000,
    ) -> None:
        config = ioctx.config
        self._BY_AGENT = bool(config.is_multi_agent)  # a multi-agent config's clients play ExternalMultiAgentEnv episodes
        where = "a PolicyServerInput (its clients send observations and take actions of the policies' spaces)"
        self._spaces = external_policy_spaces(config, None, None, where)
        """each policy's (observation, action) spaces, which what clients send is checked against"""
        for policy_id, spaces in self._spaces.items():
            for space, what in zip(spaces, ("observation space", "action space"), strict=True):
                try:
                    protocol.check_space_supported(space, f"the {what}" + (f" of policy {policy_id!r}" if self._BY_AGENT else ""))
                except ProtocolError as exc:
                    raise ConfigError(str(exc)) from None
        super().__init__(config.action_space, config.observation_space, max_concurrent)
        self.ioctx = ioctx
        self._agent_policies: dict[str, dict[str, str]] = {}
        """in each multi-agent episode, the policy each agent's values are checked against (mapped at first sight)"""
        self.episode_timeout_s = episode_timeout_s
        self._activity = threading.Lock()
        self._last_seen: dict[str, float] = {}
        """each running episode's last request, by id (monotonic time)"""
        self._stopped = threading.Event()
        self.server = PolicyHTTPServer(self._answer, address, port, auth_token, max_request_bytes)
        logger.info("env runner %d serves its policy at %s", ioctx.worker_index, self.server.address)

    @property
    def address(self) -> str:
        """The URL clients reach this server at (``http://127.0.0.1:9900``)."""
        return self.server.address

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server.port

    def run(self) -> None:
        """Serve until the runner stops, dropping every episode whose client has been silent too long."""
        while not self._stopped.wait(min(1.0, self.episode_timeout_s / 4)):
            now = time.monotonic()
            with self._activity:
                silent = [e for e, seen in self._last_seen.items() if now - seen > self.episode_timeout_s]
            for episode_id in silent:
                if self.drop_episode(episode_id, f"its client sent nothing for {self.episode_timeout_s:g} s"):
                    self._seen(episode_id, ended=True)

    def close(self) -> None:
        """Stop serving, release the port and answer every waiting client with an error."""
        self._stopped.set()
        super().close()
        self.server.stop()

    # ---------------------------------------------------------------- requests
    def _answer(self, request: Request) -> dict[str, Any]:
        """Do what a checked request asks; a request about an episode that is not running is refused with 404."""
        fields, command = request.fields, request.command
        if command == protocol.START_EPISODE:
            try:
                started = self.start_episode(fields.get("episode_id"), fields.get("training_enabled", True))
            except EnvError as exc:
                raise ProtocolError(409, str(exc)) from None
            self._seen(started)
            return {"episode_id": started}
        if self._BY_AGENT and command in (protocol.GET_WORKER_ARGS, protocol.GET_WEIGHTS):
            raise ProtocolError(
                400,
                f"{command}: this server's episodes have several agents, whose policies the server script's "
                "policy_mapping_fn picks (code, never sent): its clients act with inference_mode='remote'",
            )
        if command == protocol.GET_WORKER_ARGS:
            return self._worker_args()
        if command == protocol.GET_WEIGHTS:
            return {"state": state_codec.encode(self._policy().get_sampling_state(), compress=True)}
        if command == protocol.REPORT_SAMPLES:  # what a client did, in order; the answer is the last message's
            self._check_report(fields["samples"])
            answer: dict[str, Any] = {}
            for sample in fields["samples"]:
                answer = self._answer(sample)
            return answer
        episode_id: str = fields["episode_id"]  # every other command names its episode
        with self._activity:  # an episode with a request under way is not silent, however long the request waits
            if self._last_seen.pop(episode_id, None) is None:
                raise ProtocolError(
                    404,
                    f"{command}: no episode {episode_id!r} is running here (or it has a request under way); "
                    "START_EPISODE opens one",
                )
        try:
            return self._episode_command(command, episode_id, fields)
        except EnvError as exc:
            if self._stopped.is_set():  # a client tries again, and finds the restarted server
                raise ProtocolError(503, f"{command}: the server is stopping") from None
            raise ProtocolError(409, f"{command}: {exc}") from None
        finally:
            self._seen(episode_id, ended=command == protocol.END_EPISODE)

    def _episode_command(self, command: str, episode_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        if command == protocol.LOG_RETURNS:
            self._log_returns(episode_id, self._rewards(fields), fields.get("info"), self._dones(fields))
            return {}
        observation = self._values(
            episode_id, fields["observation"], 0, f"{command}'s observation", command == protocol.END_EPISODE
        )
        if command == protocol.GET_ACTION:
            return {"action": self.get_action(episode_id, observation)}
        if command == protocol.LOG_ACTION:
            action = self._values(episode_id, fields["action"], 1, "LOG_ACTION's action", False)
            if self._BY_AGENT and (set(action) != set(observation) or "action_prob" in fields or protocol.ACTION_LOGP in fields):
                raise ProtocolError(
                    400, "LOG_ACTION: a multi-agent episode logs an action for each agent observed, and no probability"
                )
            self.log_action(
                episode_id, observation, action, fields.get("action_prob"), action_logp=fields.get(protocol.ACTION_LOGP)
            )
            return {}
        self.end_episode(episode_id, observation)
        return {}

    def _values(self, episode_id: str, value: Any, which: int, what: str, may_be_empty: bool) -> Any:
        """An observation (``which`` 0) or action (1) checked against its space; a multi-agent one by agent."""
        if not self._BY_AGENT:
            return space_value(value, self._spaces[DEFAULT_POLICY_ID][which], what)
        if not isinstance(value, dict) or not (value or may_be_empty):
            raise ProtocolError(400, f"{what} must be a non-empty object by agent id (this server's episodes have agents)")
        return {
            agent: space_value(item, self._agent_spaces(episode_id, agent)[which], f"{what}[{agent!r}]")
            for agent, item in value.items()
        }

    def _check_action(self, episode_id: str, action: Any) -> None:
        """Nothing left to check: :meth:`_values` checked the action against its policy's space when it was read."""

    def _rewards(self, fields: dict[str, Any]) -> Any:
        reward = fields["reward"]
        if isinstance(reward, dict) != self._BY_AGENT:
            raise ProtocolError(
                400,
                "LOG_RETURNS: this server's episodes have several agents: reward must be an object of numbers by agent id"
                if self._BY_AGENT
                else "LOG_RETURNS: this server's policy acts for one agent: reward must be a number",
            )
        return reward

    def _dones(self, fields: dict[str, Any]) -> dict[str, bool] | None:
        dones = fields.get("dones")
        if dones is None:
            return None
        if not self._BY_AGENT:
            raise ProtocolError(400, "LOG_RETURNS: dones are for agents of a multi-agent episode; this server's have one")
        return {agent: done for agent, done in dones.items() if agent != ALL_AGENTS}

    def _agent_spaces(self, episode_id: str, agent: str) -> tuple[Any, Any]:
        """The spaces of the policy ``policy_mapping_fn`` maps the agent to (asked once per agent and episode)."""
        mapped = self._agent_policies.setdefault(episode_id, {})
        policy_id = mapped.get(agent)
        if policy_id is None:
            worker = self.ioctx.worker
            seen = ExternalMultiAgentEpisode(worker, -1, episode_id)  # what a mapping may read; the runner has its own
            try:
                policy_id = map_agent(self.ioctx.config.policy_mapping_fn, agent, seen, self._spaces, worker)
            except ConfigError as exc:
                raise ProtocolError(400, f"agent {agent!r}: {exc}") from None
            mapped[agent] = policy_id
        return self._spaces[policy_id]

    def _check_report(self, samples: list[Request]) -> None:
        """Refuse (404) a report that continues an episode not running here, before any of it is used."""
        started: set[str] = set()
        with self._activity:
            running = set(self._last_seen)
        for sample in samples:
            episode_id = sample.fields.get("episode_id")
            if sample.command == protocol.START_EPISODE and episode_id is not None:
                started.add(episode_id)
            elif episode_id not in started and episode_id not in running:
                raise ProtocolError(
                    404, f"REPORT_SAMPLES: no episode {episode_id!r} is running here; start it in the report (nothing was used)"
                )

    def _policy(self) -> Any:
        return self.ioctx.worker.policies[DEFAULT_POLICY_ID]

    def _worker_args(self) -> dict[str, Any]:
        """What a client that acts itself builds its copy of the policy from: data only, never code or pickles.

        The algorithm by its registered name, the policy's spaces, and the config without the script's own objects
        (stored by value, which the client's policy does not need); the weights come with ``GET_WEIGHTS``.
        """
        config = self.ioctx.config
        data = config.to_dict()
        by_script = data.pop(by_value.TABLE_KEY, None) or {}
        data = {key: value for key, value in data.items() if not (isinstance(value, str) and value in by_script)}
        data["input_"] = "sampler"
        policy = self._policy()
        return {
            "algorithm": config.algo_class.name,
            "policy_id": DEFAULT_POLICY_ID,
            "observation_space": encode_space(policy.observation_space),
            "action_space": encode_space(policy.action_space),
            "config": data,
            "report_steps": config.get_rollout_fragment_length(),
        }

    def _seen(self, episode_id: str, ended: bool = False) -> None:
        """A request about the episode was answered; an episode that ended (or was dropped) is forgotten."""
        with self._activity:
            if ended:
                self._last_seen.pop(episode_id, None)
                self._agent_policies.pop(episode_id, None)
            else:
                self._last_seen[episode_id] = time.monotonic()


def policy_servers(address: str = "localhost", port: int = 9900, **server_options: Any) -> Any:
    """An ``input_`` that puts a server on each env runner that samples, by RLlib's port convention.

    With no remote env runners the local runner serves on ``port``. With N, remote runner ``i`` serves on
    ``port + i - 1`` and the local runner samples nothing: RLlib's server scripts pick their ports the same way.

    Args:
        address: the interface every server binds.
        port: the first server's port (0: each picks a free one).
        server_options: :class:`PolicyServerInput`'s keyword arguments (``auth_token``, ``episode_timeout_s``, ...).

    Returns:
        ``make(ioctx)``, for ``offline_data(input_=...)``.
    """

    def make(ioctx: Any) -> PolicyServerInput | None:
        remote_runners = getattr(ioctx.worker, "num_workers", 0)
        if ioctx.worker_index == 0 and remote_runners > 0:
            return None
        offset = max(ioctx.worker_index - 1, 0)
        return PolicyServerInput(ioctx, address, port + offset if port else 0, **server_options)

    return make


def server_address(runner: Any) -> str | None:
    """The address an env runner serves at, or None where it serves nothing (for ``foreach_env_runner``).

    Args:
        runner: an env runner.

    Returns:
        Its PolicyServerInput's URL, or None.
    """
    env = getattr(runner, "env", None)
    return env.address if isinstance(env, PolicyServerInput) else None

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

from corral.core.environments.external_env import ExternalEnv
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
        if config.observation_space is None or config.action_space is None:
            raise ConfigError(
                "a PolicyServerInput's clients send observations and take actions of the policy's spaces: give them in "
                "environment(observation_space=..., action_space=...)"
            )
        for space, what in ((config.observation_space, "the observation space"), (config.action_space, "the action space")):
            try:
                protocol.check_space_supported(space, what)
            except ProtocolError as exc:
                raise ConfigError(str(exc)) from None
        super().__init__(config.action_space, config.observation_space, max_concurrent)
        self.ioctx = ioctx
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
                    with self._activity:
                        self._last_seen.pop(episode_id, None)

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
        if command in (protocol.GET_WORKER_ARGS, protocol.GET_WEIGHTS, protocol.REPORT_SAMPLES):
            raise ProtocolError(
                400,
                f"{command} is for clients that act themselves (inference_mode='local'), which corral does not serve "
                "yet: use PolicyClient(address, inference_mode='remote')",
            )
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
            reward = fields["reward"]
            if isinstance(reward, dict):
                raise ProtocolError(400, "LOG_RETURNS: this server's policy acts for one agent: reward must be a number")
            self.log_returns(episode_id, float(reward), fields.get("info"))
            return {}
        observation = space_value(fields["observation"], self.observation_space, f"{command}'s observation")
        if command == protocol.GET_ACTION:
            return {"action": self.get_action(episode_id, observation)}
        if command == protocol.LOG_ACTION:
            action = space_value(fields["action"], self.action_space, "LOG_ACTION's action")
            self.log_action(episode_id, observation, action, fields.get("action_prob"))
            return {}
        self.end_episode(episode_id, observation)
        return {}

    def _seen(self, episode_id: str, ended: bool = False) -> None:
        with self._activity:
            if ended:
                self._last_seen.pop(episode_id, None)
            else:
                self._last_seen[episode_id] = time.monotonic()

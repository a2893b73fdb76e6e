"""A group's remote env runners: Ray actors by worker index, the calls on them, and their failures.

A runner whose call fails is replaced before the next call
(``recreate_failed_env_runners``), dropped (``ignore_env_runner_failures``),
or reported, as the fault-tolerance options say; a run of failures longer
than ``num_consecutive_env_runner_failures_tolerance`` is reported anyway.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from corral.core.contracts.config import AlgorithmConfig
from corral.core.environments.envs import env_name
from corral.core.learning.policy import PolicyBuild
from corral.errors import EnvRunnerError

logger = logging.getLogger("corral")


class RemoteRunners:
    """The remote env runners of a group, started at once and replaced, dropped or reported when they fail.

    Args:
        config: the runners' config (``num_env_runners``, resources, fault tolerance);
            for evaluation runners, the evaluation config.
        policy_builds: how the runners build their policy copies, by policy id (the
            algorithm's dict: a policy added to it later is built by runners started later).
        stream: ``"sampling"`` or ``"evaluation"``: with each runner's index, where its generators derive from.
        num_remote: how many runners (worker indexes 1..num_remote).
        on_recreated: called with the group and the indexes of the runners it started anew
            in place of failed ones (the algorithm's ``on_env_runners_recreated`` hook).
    """

    def __init__(
        self,
        config: AlgorithmConfig | None,
        policy_builds: dict[str, PolicyBuild] | None,
        stream: str,
        num_remote: int,
        on_recreated: Callable[[Any, list[int]], None] | None,
    ) -> None:
        self._config = config
        self._policy_builds = policy_builds
        self._stream = stream
        self._on_recreated = on_recreated
        self._remote: dict[int, Any] = {}
        self._failed: set[int] = set()
        self._failures_in_a_row: dict[int, int] = {}
        """by runner index: its failures since a call of it last succeeded"""
        self._published_at: int | None = None
        """the learner map's eviction count at the last publication every healthy runner received (None: none did)"""
        self.num_restarts = 0
        if num_remote > 0:
            from corral.core.learning.learners.learner_group import ensure_ray

            self._ray = ensure_ray()
            for index in range(1, num_remote + 1):
                self._remote[index] = self._start(index)

    def _wait_until_started(self, warn_every_s: float) -> None:
        """Fail now, not mid-training, if a runner cannot start (its env does not import, say); then release them all.

        Runners waiting for resources (another job holds the CPUs) are waited
        for, with a warning every ``warn_every_s`` seconds that says what they need.
        """
        pings = [actor.ping.remote() for actor in self._remote.values()]
        try:
            while len(self._ray.wait(pings, num_returns=len(pings), timeout=warn_every_s)[0]) < len(pings):
                cfg = self._config
                assert cfg is not None
                logger.warning(
                    "remote env runners are still waiting to start: each needs num_cpus_per_env_runner=%s, "
                    "num_gpus_per_env_runner=%s; the Ray cluster has %s free. Free resources, or ask for fewer runners.",
                    cfg.num_cpus_per_env_runner, cfg.num_gpus_per_env_runner, self._ray.available_resources(),
                )  # fmt: skip
            self._ray.get(pings)
        except self._ray.exceptions.RayError as exc:
            for actor in self._remote.values():
                self._ray.kill(actor)
            self._remote.clear()
            raise EnvRunnerError(f"the remote env runners could not start; the error, from a runner:\n{_plain(exc)}") from exc

    @property
    def remote_env_runners(self) -> list[Any]:
        """The actor handles of the healthy remote runners, by worker index."""
        return [actor for index, actor in sorted(self._remote.items()) if index not in self._failed]

    @property
    def num_healthy_remote_runners(self) -> int:
        """Remote runners currently alive."""
        return len(self._remote) - len(self._failed)

    def healthy_remote_ids(self) -> list[int]:
        """Indexes (1..num_env_runners) of the remote runners currently alive."""
        return [index for index in sorted(self._remote) if index not in self._failed]

    def remote_env_runner(self, index: int) -> Any:
        """The actor handle of remote runner ``index`` (a new handle after it is replaced)."""
        return self._remote[index]

    def ended(self, calls: list[Any], timeout: float | None) -> set[Any]:
        """Those of ``calls`` (Ray object references) that ended within ``timeout`` seconds (0: those ended now).

        Args:
            calls: the calls.
            timeout: how long to wait for all of them; None: until they all end.
        """
        if not calls:
            return set()
        done, _ = self._ray.wait(calls, num_returns=len(calls), timeout=timeout)
        return set(done)

    def gather(self, pending: dict[int, Any], timeout_s: float | None = None) -> dict[int, Any]:
        """Wait for every call, by runner index; a failed one is handled by the fault-tolerance options and left out.

        Args:
            pending: by runner index, its call in flight.
            timeout_s: wait this long at most; a call not done by then is left out (and goes on). None: no limit.

        Returns:
            By runner index, what its call returned.
        """
        if timeout_s is not None and pending:
            done, _ = self._ray.wait(list(pending.values()), num_returns=len(pending), timeout=timeout_s)
            pending = {index: ref for index, ref in pending.items() if ref in done}
        results = {}
        for index, ref in pending.items():
            try:
                results[index] = self._ray.get(ref)
            except self._ray.exceptions.RayError as exc:
                self.handle_failure(index, exc)
            else:
                self.succeeded(index)
        return results

    def succeeded(self, index: int) -> None:
        """A call on runner ``index`` succeeded: its failures are no longer in a row."""
        self._failures_in_a_row.pop(index, None)

    def give_up(self, indexes: list[int]) -> None:
        """Runners whose calls are given up (they ran too long): restarted before the next call, as failed ones are."""
        self._failed.update(indexes)

    def handle_failure(self, index: int, exc: Exception) -> None:
        """A call on runner ``index`` failed: mark it for replacement, drop it, or raise, as the options say.

        Args:
            index: the failed runner's worker index (1..num_env_runners).
            exc: the error the call raised (a Ray error carrying the runner's traceback).

        Raises:
            EnvRunnerError: neither ``recreate_failed_env_runners`` nor
                ``ignore_env_runner_failures`` is set, or the runner failed more than
                ``num_consecutive_env_runner_failures_tolerance`` times in a row; names
                the runner and carries its traceback.
        """
        assert self._config is not None
        if index not in self._remote or index in self._failed:
            return  # another call in flight on the same runner failed first: handled already
        what = f"env runner {index} ({env_name(self._config.env)})"
        if self._config.recreate_failed_env_runners:
            in_a_row = self._failures_in_a_row[index] = self._failures_in_a_row.get(index, 0) + 1
            tolerance = self._config.num_consecutive_env_runner_failures_tolerance
            if in_a_row > tolerance:
                raise EnvRunnerError(
                    f"{what} failed {in_a_row} times in a row, more than num_consecutive_env_runner_failures_tolerance="
                    f"{tolerance}; the last error, from the runner:\n{_plain(exc)}"
                ) from exc
            logger.warning("%s failed and will be replaced: %s", what, first_line(exc))
            self._failed.add(index)
        elif self._config.ignore_env_runner_failures:
            logger.warning("%s failed and is dropped; %d remain: %s", what, self.num_healthy_remote_runners - 1, first_line(exc))
            self._ray.kill(self._remote.pop(index))
        else:
            raise EnvRunnerError(
                f"{what} failed; set fault_tolerance(recreate_failed_env_runners=True) to replace failed runners, "
                f"or ignore_env_runner_failures=True to go on without them. The error, from the runner:\n{_plain(exc)}"
            ) from exc

    def replace_failed(self) -> None:
        """Start a new actor in place of each runner marked failed (the next publication is then complete)."""
        if self._failed:
            self._published_at = None
        restarted = sorted(self._failed)
        for index in restarted:
            self._ray.kill(self._remote[index])
            self._remote[index] = self._start(index)
            self.num_restarts += 1
        self._failed.clear()
        self._probe(restarted)
        if restarted and self._on_recreated is not None:
            self._on_recreated(self, restarted)

    def _probe(self, indices: list[int]) -> None:
        """Ping restarted runners; one that does not answer within ``worker_health_probe_timeout_s`` has failed again."""
        if not indices:
            return
        assert self._config is not None
        timeout = self._config.worker_health_probe_timeout_s
        pings = {index: self._remote[index].ping.remote() for index in indices}
        answered = self.ended(list(pings.values()), timeout)
        for index, ref in pings.items():
            # an answer is no success that ends a run of failures: only a call that did work is
            try:
                if ref not in answered:
                    raise TimeoutError(f"no answer to a health probe within worker_health_probe_timeout_s={timeout}")
                self._ray.get(ref)
            except (TimeoutError, self._ray.exceptions.RayError) as exc:
                self.handle_failure(index, exc)

    def _start(self, index: int) -> Any:
        from corral.core.sampling.remote_env_runner import start_env_runner

        assert self._config is not None and self._policy_builds is not None
        return start_env_runner(self._config, self._policy_builds, index, self._stream)

    def _stop_remote(self, timeout_s: float) -> None:
        """Stop every runner: a graceful stop first (it closes envs, removes policy files), then each actor is killed.

        Args:
            timeout_s: how long to wait for the graceful stops.
        """
        pending = [self._remote[index].stop.remote() for index in self.healthy_remote_ids()]
        if pending:
            self._ray.wait(pending, num_returns=len(pending), timeout=timeout_s)
        for actor in self._remote.values():
            self._ray.kill(actor)
        self._remote.clear()
        self._failed.clear()


def _plain(exc: BaseException) -> str:
    """The exception's text without the terminal colours Ray adds."""
    return re.sub(r"\x1b\[[0-9;]*m", "", str(exc))


def first_line(exc: BaseException) -> str:
    """The first line of the exception's text (a runner's error, shown in one log line)."""
    lines = _plain(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

"""The env runners of one algorithm: the local one, and with ``num_env_runners > 0`` remote Ray actors.

With remote runners the local runner only holds the policies the learner
trains; sampling happens on the actors, all at once. Before each sample call
the driver puts the policy's weights into Ray's object store once and hands
every actor the same reference, so a broadcast costs one copy whatever the
number of runners. A runner that fails is replaced, dropped, or reported,
as the fault-tolerance options say.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from corral.core.common.sample_batch import MultiAgentBatch
from corral.core.contracts.config import AlgorithmConfig
from corral.core.learning.policy import PolicyBuild
from corral.core.learning.policy_map import PolicyMap
from corral.core.sampling.env_runner_group.evaluation import (
    EvaluationRound as EvaluationRound,
    continue_round,
    finish_round,
    start_round,
)
from corral.core.sampling.env_runner_group.remote_runners import RemoteRunners, first_line
from corral.core.sampling.metrics import EpisodeSummary
from corral.core.sampling.multi_agent_env_runner import AnyEnvRunner, MultiAgentEnvRunner
from corral.core.sampling.remote_env_runner import RemoteSample
from corral.errors import ConfigError, EnvRunnerError

START_WARNING_INTERVAL_S = 30.0
"""how often to warn while remote runners wait for resources to start"""
STOP_TIMEOUT_S = 10.0
"""how long stop() waits for the remote runners to close their envs before it kills them"""


class EnvRunnerGroup(RemoteRunners):
    """The local env runner and the remote ones; one place to sample, broadcast and run functions.

    The remote runners, their calls and their failures are :class:`RemoteRunners`'.

    Args:
        local_env_runner: the runner in this process, which holds the policies.
        config: the algorithm's config (``num_env_runners``, resources, fault tolerance);
            for evaluation runners, the evaluation config.
        policy_builds: how the remote runners build their policy copies, by policy id
            (the algorithm's dict: a policy added to it later is built by runners started later).
        stream: ``"sampling"`` or ``"evaluation"``: with each runner's index, where its generators derive from.
        num_remote: how many remote runners; default ``config.num_env_runners``.
        on_recreated: called with the group and the indexes of the runners it started anew
            in place of failed ones (the algorithm's ``on_env_runners_recreated`` hook).
    """

    def __init__(
        self,
        local_env_runner: AnyEnvRunner,
        config: AlgorithmConfig | None = None,
        policy_builds: dict[str, PolicyBuild] | None = None,
        stream: str = "sampling",
        num_remote: int | None = None,
        on_recreated: Callable[[EnvRunnerGroup, list[int]], None] | None = None,
    ) -> None:
        self.local_env_runner = local_env_runner
        self._episodes: list[EpisodeSummary] = []
        if num_remote is None:
            num_remote = config.num_env_runners if config is not None else 0
        super().__init__(config, policy_builds, stream, num_remote, on_recreated)
        if self._remote:
            self._wait_until_started(START_WARNING_INTERVAL_S)

    # ------------------------------------------------------------------ #
    # what the algorithm uses
    # ------------------------------------------------------------------ #
    @property
    def num_sampling_envs(self) -> int:
        """Sub-environments one sample call steps: those of the healthy remote runners, or the local runner's."""
        if self._remote and self._config is not None:
            return max(1, self.num_healthy_remote_runners) * self._config.num_envs_per_env_runner
        return self.local_env_runner.num_envs

    def sample(self, num_steps: int | None = None) -> MultiAgentBatch:
        """One sample call on every runner that samples (the remote ones if there are any), joined.

        Args:
            num_steps: steps per sub-environment; default the config's rollout fragment length.
        """
        return MultiAgentBatch.concat(self.sample_each(num_steps))

    def sample_each(self, num_steps: int | None = None) -> list[MultiAgentBatch]:
        """One sample call on every runner that samples (the remote ones if there are any): each one's batch.

        Args:
            num_steps: steps per sub-environment; default the config's rollout fragment length.

        Raises:
            EnvRunnerError: every remote runner failed in the call.
        """
        if not self._remote:
            return [self.local_env_runner.sample(num_steps)]
        state = self._publish_sampling_state()
        pending = {index: self._remote[index].sample.remote(state, num_steps) for index in self.healthy_remote_ids()}
        batches = [self.accept(result) for result in self.gather(pending).values()]
        if not batches:
            raise EnvRunnerError("every remote env runner failed in this sample call; nothing was sampled")
        return batches

    @property
    def is_multi_agent(self) -> bool:
        """Whether the runners step a multi-agent env (their batches hold a policy's rows per policy id)."""
        return isinstance(self.local_env_runner, MultiAgentEnvRunner)

    def start_episodes(self, duration: int | str, unit: str, explore: bool) -> EvaluationRound:
        """Start evaluating on the remote runners with the current weights; finish with :meth:`finish_episodes`.

        ``duration`` episodes (or timesteps, by ``unit``) are split across the
        healthy runners; ``"auto"`` starts one episode on each, and
        :meth:`continue_episodes` starts the next as each ends. Returns at once,
        so training can go on meanwhile.

        Args:
            duration: episodes or timesteps to evaluate in all, split as evenly as
                possible (a runner whose share is 0 gets no call); or ``"auto"``.
            unit: ``"episodes"`` or ``"timesteps"`` (``"auto"`` runs whole episodes in either).
            explore: act with exploration; False acts deterministically.

        Returns:
            The round in flight, for :meth:`continue_episodes` and :meth:`finish_episodes`.

        Raises:
            EnvRunnerError: no healthy remote runner is left.
        """
        round_ = start_round(self, self._publish_sampling_state(), duration, unit, explore)
        if len(round_.pending) < self.num_healthy_remote_runners:
            self._published_at = None  # a runner without a share misses this state: the next one is complete
        return round_

    def continue_episodes(self, round_: EvaluationRound) -> None:
        """Collect the episodes of a continuous round's ended calls and start the next episode on each such runner."""
        continue_round(self, round_)

    def finish_episodes(self, round_: EvaluationRound) -> list[EpisodeSummary]:
        """The episodes of a round, once its calls end (a failed runner's are left out).

        A call still running after ``evaluation_sample_timeout_s`` is given up: its
        runner is restarted before the next call, so nothing queues behind it.
        """
        assert self._config is not None
        return finish_round(self, round_, self._config.evaluation_sample_timeout_s)

    def get_metrics(self) -> list[EpisodeSummary]:
        """Episodes finished on every runner since the last call."""
        episodes, self._episodes = self._episodes, []
        return self.local_env_runner.get_metrics() + episodes

    def add_metrics(self, episodes: list[EpisodeSummary]) -> None:
        """Episodes a remote runner finished outside :meth:`sample` (a ``foreach_env_runner`` call that sampled, as
        DD-PPO's runners do), for the next :meth:`get_metrics`.

        Args:
            episodes: what the runner's ``get_metrics()`` returned.
        """
        self._episodes.extend(episodes)

    def foreach_env_runner(
        self,
        func: Callable[[AnyEnvRunner], Any],
        *,
        local_env_runner: bool = True,
        healthy_only: bool = True,
        remote_worker_ids: Sequence[int] | None = None,
        timeout_seconds: float | None = None,
    ) -> list[Any]:
        """``func(runner)`` on every runner: the local one first, then the healthy remote ones by index.

        A remote runner that fails is handled as in sampling (replaced,
        dropped or reported); its result is left out.

        Args:
            func: called with each runner.
            local_env_runner: include the local runner.
            healthy_only: RLlib's choice to leave out runners marked unhealthy. corral keeps none: a failed
                runner is replaced or dropped as soon as its failure is seen, so both values call the same runners.
            remote_worker_ids: only these remote runners (1..num_env_runners).
            timeout_seconds: wait this long at most for the remote runners; a runner not done by then is left
                out of the results (its call goes on), as in RLlib. None: wait for all of them.
        """
        del healthy_only  # every runner corral holds is healthy (see above)
        results = [self.local_env_runner.apply(func)] if local_env_runner else []
        if self._remote:
            healthy = self.healthy_remote_ids()
            wanted = healthy if remote_worker_ids is None else [i for i in remote_worker_ids if i in healthy]
            calls = {i: self._remote[i].apply.remote(func) for i in wanted}
            results += list(self.gather(calls, timeout_s=timeout_seconds).values())
        return results

    def foreach_worker(
        self,
        func: Callable[[AnyEnvRunner], Any],
        *,
        local_worker: bool = True,
        local_env_runner: bool | None = None,
        **options: Any,
    ) -> list[Any]:
        """RLlib's older name of :meth:`foreach_env_runner`, with the older name of its flag (``local_worker``).

        Args:
            func: called with each runner.
            local_worker: include the local runner (Ray 2.9 and before).
            local_env_runner: the same, as later Ray versions name it; wins when given.
            **options: ``healthy_only``, ``remote_worker_ids``, ``timeout_seconds``, as :meth:`foreach_env_runner`.
        """
        local = local_worker if local_env_runner is None else local_env_runner
        return self.foreach_env_runner(func, local_env_runner=local, **options)

    def foreach_env_runner_with_id(
        self, func: Callable[[int, AnyEnvRunner], Any], *, local_env_runner: bool = True, **options: Any
    ) -> list[Any]:
        """``func(index, runner)`` on every runner, as :meth:`foreach_env_runner` (RLlib's order: the id first, 0 local).

        Args:
            func: called with each runner's worker index and the runner.
            local_env_runner: include the local runner.
            **options: ``healthy_only``, ``remote_worker_ids``, ``timeout_seconds``, as :meth:`foreach_env_runner`.

        Raises:
            ConfigError: ``func`` takes ``(runner, index)``: it looked up a runner's attribute on the index.
        """
        call = functools.partial(_call_with_index, func, True)
        return self.foreach_env_runner(call, local_env_runner=local_env_runner, **options)

    def foreach_worker_with_id(
        self,
        func: Callable[[int, AnyEnvRunner], Any],
        *,
        local_worker: bool = True,
        local_env_runner: bool | None = None,
        **options: Any,
    ) -> list[Any]:
        """RLlib's older name of :meth:`foreach_env_runner_with_id`, with the older name of its flag.

        Args:
            func: called with each runner's worker index and the runner.
            local_worker: include the local runner (Ray 2.9 and before).
            local_env_runner: the same, as later Ray versions name it; wins when given.
            **options: ``healthy_only``, ``remote_worker_ids``, ``timeout_seconds``, as :meth:`foreach_env_runner`.
        """
        call = functools.partial(_call_with_index, func, True)
        return self.foreach_worker(call, local_worker=local_worker, local_env_runner=local_env_runner, **options)

    def foreach_env_runner_with_index(
        self, func: Callable[[AnyEnvRunner, int], Any], *, local_env_runner: bool = True
    ) -> list[Any]:
        """``func(runner, index)`` on every runner, as :meth:`foreach_env_runner` (the local runner's index is 0).

        Args:
            func: called with each runner and its worker index.
            local_env_runner: include the local runner.

        Raises:
            ConfigError: ``func`` takes ``(index, runner)``: it looked up a runner's attribute on the index.
        """
        return self.foreach_env_runner(functools.partial(_call_with_index, func, False), local_env_runner=local_env_runner)

    foreach_worker_with_index = foreach_env_runner_with_index
    """RLlib's older name."""

    def foreach_env(self, func: Callable[[Any], Any]) -> list[list[Any]]:
        """``func(env)`` on every sub-environment of every runner, as RLlib's ``workers.foreach_env``.

        Args:
            func: called with each sub-environment as the user made it (see ``EnvRunner.foreach_env``).

        Returns:
            A list per runner (the local one first), of what ``func`` returned for each of its sub-environments.
        """
        return self.foreach_env_runner(functools.partial(_foreach_env, func))

    def local_worker(self) -> AnyEnvRunner:
        """The runner in this process (RLlib's older ``workers.local_worker()``; corral's ``local_env_runner``)."""
        return self.local_env_runner

    def update_policies(self, config: AlgorithmConfig, added: dict[str, PolicyBuild], removed: list[str]) -> None:
        """The algorithm added or removed policies: every runner takes the new config and policy set.

        The local runner shares the algorithm's policies already; it takes the
        config and lets go of the removed ones' episodes and rows. Each remote
        runner builds the added policies (their weights come with the next
        broadcast) and drops the removed ones. Runners started later (replacing
        failed ones) start from ``config`` and the algorithm's policy builds.

        Args:
            config: the algorithm's new config (the evaluation config, for evaluation runners).
            added: builds of the new policies, by id.
            removed: ids of the policies removed.
        """
        self._config = config
        local = self.local_env_runner
        local.config = config
        for policy_id in removed:
            local.forget_policy(policy_id)
        if self._remote:
            self.gather({i: self._remote[i].update_policies.remote(config, added, removed) for i in self.healthy_remote_ids()})

    def get_state(self) -> dict[str, Any]:
        """The local runner's state and each healthy remote runner's, by worker index (JSON).

        The remote runners' states include their policy copies' generators.
        """
        remote = self.gather({i: self._remote[i].get_state.remote() for i in self.healthy_remote_ids()}) if self._remote else {}
        return {"local": self.local_env_runner.get_state(), "remote": {str(i): s for i, s in remote.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`; a remote runner missing from it (or from this group) keeps its own state.

        Raises:
            ValueError: a state does not fit its runner.
        """
        self.local_env_runner.set_state(state["local"])
        remote = state.get("remote") or {}
        if not isinstance(remote, dict):
            raise ValueError("the remote runners' states must be a dict by worker index")
        calls = {
            int(i): self._remote[int(i)].set_state.remote(s)
            for i, s in remote.items()
            if str(i).isdigit() and int(i) in self._remote
        }
        for index, call in calls.items():
            try:
                self._ray.get(call)
            except self._ray.exceptions.RayTaskError as exc:
                raise ValueError(f"remote env runner {index} could not take its state: {first_line(exc)}") from exc

    def stop(self) -> None:
        """Close every runner's environments and release every actor this group started."""
        self.local_env_runner.stop()
        self._stop_remote(STOP_TIMEOUT_S)  # a runner that does not answer in time is killed anyway

    # ------------------------------------------------------------------ #
    # broadcasting to the remote runners, and what comes back
    # ------------------------------------------------------------------ #
    def accept(self, result: RemoteSample, keep_episodes: bool = True) -> MultiAgentBatch:
        """Take in a remote sample call's result; returns its batch.

        Its episodes are kept for the next :meth:`get_metrics` (unless
        ``keep_episodes`` is False: a runner whose episodes are not reported), its observation
        statistics go into the learner's filters, and each learner policy's
        timestep advances as its remote copy's did, so schedules stay in step.

        Args:
            result: the call's result.
            keep_episodes: whether its finished episodes go into the results.

        Returns:
            The call's batch.
        """
        if keep_episodes:
            self._episodes.extend(result.episodes)
        policies = self.local_env_runner.policies
        for policy_id, delta in result.filter_deltas.items():
            filter_ = policies[policy_id].observation_filter if policy_id in policies else None  # removed meanwhile
            if filter_ is not None:
                filter_.merge(delta)
        for policy_id, steps in result.timesteps.items():
            if policy_id in policies:
                policies[policy_id].global_timestep += steps
        return result.batch

    def _publish_sampling_state(self) -> Any:
        """Replace failed runners, then put the learner's sampling state in the object store once for all of them.

        Every healthy runner receives it. So once one publication went to all of
        them, the next needs only the policies that may have changed since (see
        :meth:`sampling_state`).
        """
        self.replace_failed()
        state = self.sampling_state(changed_since=self._published_at)
        self._published_at = self._policy_map().evictions
        return self._ray.put(state)

    def sampling_state(
        self, changed_since: int | None = None, weights: dict[str, dict[str, Any]] | None = None
    ) -> dict[str, dict[str, Any]]:
        """The learner policies' :meth:`~corral.core.learning.policy.Policy.get_sampling_state`, by policy id.

        Args:
            changed_since: the policy map's eviction count at a publication every runner
                received; only the policies that may have changed since are included:
                those in memory, and those moved to disk after it (a policy on disk does
                not change). None: every policy, whether in memory or not.
            weights: weights by policy id to send instead of the policies' own (a learner
                thread's copy, taken between two updates).

        Returns:
            The states by policy id.
        """
        policies = self._policy_map()
        ids = list(policies) if changed_since is None else [*policies.loaded(), *policies.moved_out_since(changed_since)]
        weights = weights or {}
        return {policy_id: policies[policy_id].get_sampling_state(weights.get(policy_id)) for policy_id in ids}

    def _policy_map(self) -> PolicyMap:
        """The learner's policies, which the local runner shares (the algorithm built it with them)."""
        policies = self.local_env_runner.policies
        assert isinstance(policies, PolicyMap)
        return policies


def _foreach_env(fn: Callable[[Any], Any], runner: AnyEnvRunner) -> list[Any]:
    return runner.foreach_env(fn)


def _call_with_index(fn: Callable[..., Any], index_first: bool, runner: AnyEnvRunner) -> Any:
    """``fn(index, runner)`` or ``fn(runner, index)``; a function written for the other order is told which method it needs.

    Such a function looks up a runner's attribute (``get_policy``, ``foreach_env``) on the
    index, an int: that AttributeError becomes a ConfigError naming the right method.
    """
    index = runner.worker_index
    try:
        return fn(index, runner) if index_first else fn(runner, index)
    except AttributeError as exc:
        name = exc.name
        if not (type(exc.obj) is int and exc.obj == index and name is not None and hasattr(runner, name)):
            raise
        called, other = ("with_id", "with_index") if index_first else ("with_index", "with_id")
        raise ConfigError(
            f"foreach_worker_{called} calls fn{_ORDERS[called]}, but fn looked up {name!r} on the index: it takes "
            f"{_ORDERS[other]}. Use foreach_worker_{other}(fn) (or foreach_env_runner_{other}), or swap fn's arguments"
        ) from exc


_ORDERS = {"with_id": "(index, worker)", "with_index": "(worker, index)"}
"""the arguments each of the two methods gives, in order (RLlib's foreach_worker_with_id gives the index first)"""

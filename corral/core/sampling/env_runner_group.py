"""The env runners of one algorithm: the local one, and with ``num_env_runners > 0`` remote Ray actors.

With remote runners the local runner only holds the policies the learner
trains; sampling happens on the actors, all at once. Before each sample call
the driver puts the policy's weights into Ray's object store once and hands
every actor the same reference, so a broadcast costs one copy whatever the
number of runners. A runner that fails is replaced, dropped, or reported,
as the fault-tolerance options say.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from corral.core.common.sample_batch import MultiAgentBatch
from corral.core.contracts.config import AlgorithmConfig
from corral.core.environments.envs import env_name
from corral.core.learning.policy import PolicyBuild
from corral.core.learning.policy_map import PolicyMap
from corral.core.sampling.env_runner import EpisodeSummary, evaluation_span
from corral.core.sampling.multi_agent_env_runner import AnyEnvRunner
from corral.core.sampling.remote_env_runner import RemoteSample
from corral.errors import ConfigError, EnvRunnerError

logger = logging.getLogger("corral")

START_WARNING_INTERVAL_S = 30.0
"""how often to warn while remote runners wait for resources to start"""
STOP_TIMEOUT_S = 10.0
"""how long stop() waits for the remote runners to close their envs before it kills them"""


@dataclasses.dataclass
class EvaluationRound:
    """Evaluation calls in flight on the remote runners, started by :meth:`EnvRunnerGroup.start_episodes`."""

    state: Any
    """the published sampling state every call acts with (a Ray object reference)"""
    explore: bool
    """whether the calls act with exploration"""
    pending: dict[int, Any]
    """by runner index: its call in flight"""
    continuous: bool = False
    """``evaluation_duration="auto"``: a runner whose episode ended starts another, until the round is finished"""
    episodes: list[EpisodeSummary] = dataclasses.field(default_factory=list)
    """the episodes of the calls that have ended"""


class EnvRunnerGroup:
    """The local env runner and the remote ones; one place to sample, broadcast and run functions.

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
        self._on_recreated = on_recreated
        self._config = config
        self._policy_builds = policy_builds
        self._stream = stream
        self._remote: dict[int, Any] = {}
        self._failed: set[int] = set()
        self._failures_in_a_row: dict[int, int] = {}
        """by runner index: its failures since a call of it last succeeded"""
        self._published_at: int | None = None
        """the learner map's eviction count at the last publication every healthy runner received (None: none did)"""
        self._episodes: list[EpisodeSummary] = []
        self.num_restarts = 0
        if num_remote is None:
            num_remote = config.num_env_runners if config is not None else 0
        if num_remote > 0:
            from corral.core.sampling.remote_env_runner import ensure_ray

            self._ray = ensure_ray()
            for index in range(1, num_remote + 1):
                self._remote[index] = self._start(index)
            self._wait_until_started()

    def _wait_until_started(self) -> None:
        """Fail now, not mid-training, if a runner cannot start (its env does not import, say); then release them all.

        Runners waiting for resources (another job holds the CPUs) are waited
        for, with a warning every ``START_WARNING_INTERVAL_S`` that says what they need.
        """
        pings = [actor.ping.remote() for actor in self._remote.values()]
        try:
            while len(self._ray.wait(pings, num_returns=len(pings), timeout=START_WARNING_INTERVAL_S)[0]) < len(pings):
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

    # ------------------------------------------------------------------ #
    # what the algorithm uses
    # ------------------------------------------------------------------ #
    @property
    def remote_env_runners(self) -> list[Any]:
        """The actor handles of the healthy remote runners, by worker index."""
        return [actor for index, actor in sorted(self._remote.items()) if index not in self._failed]

    @property
    def num_healthy_remote_runners(self) -> int:
        """Remote runners currently alive."""
        return len(self._remote) - len(self._failed)

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
        if not self._remote:
            return self.local_env_runner.sample(num_steps)
        state = self._publish_sampling_state()
        pending = {index: self._remote[index].sample.remote(state, num_steps) for index in self.healthy_remote_ids()}
        batches = [self.accept(result) for result in self._gather(pending).values()]
        if not batches:
            raise EnvRunnerError("every remote env runner failed in this sample call; nothing was sampled")
        return MultiAgentBatch.concat(batches)

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
        state = self._publish_sampling_state()
        healthy = self.healthy_remote_ids()
        if not healthy:
            raise EnvRunnerError("no remote env runner is left to evaluate on")
        if duration == "auto":
            pending = {index: self._remote[index].run_episodes.remote(state, explore, num_episodes=1) for index in healthy}
            return EvaluationRound(state, explore, pending, continuous=True)
        assert isinstance(duration, int)
        shares = [duration // len(healthy) + (i < duration % len(healthy)) for i in range(len(healthy))]
        if 0 in shares:
            self._published_at = None  # a runner without a share misses this state: the next one is complete
        pending = {
            index: self._remote[index].run_episodes.remote(state, explore, **evaluation_span(share, unit))
            for index, share in zip(healthy, shares, strict=True)
            if share > 0
        }
        return EvaluationRound(state, explore, pending)

    def continue_episodes(self, round_: EvaluationRound) -> None:
        """Collect the episodes of a continuous round's ended calls and start the next episode on each such runner."""
        if not round_.continuous or not round_.pending:
            return
        ready, _ = self._ray.wait(list(round_.pending.values()), num_returns=len(round_.pending), timeout=0)
        done = set(ready)
        ended = {index: ref for index, ref in round_.pending.items() if ref in done}
        for episodes in self._gather(ended).values():
            round_.episodes.extend(episodes)
        for index in ended:
            del round_.pending[index]
            if index in self.healthy_remote_ids():
                round_.pending[index] = self._remote[index].run_episodes.remote(round_.state, round_.explore, num_episodes=1)

    def finish_episodes(self, round_: EvaluationRound) -> list[EpisodeSummary]:
        """The episodes of a round, once its calls end (a failed runner's are left out).

        A call still running after ``evaluation_sample_timeout_s`` is given up: its
        runner is restarted before the next call, so nothing queues behind it.
        """
        assert self._config is not None
        pending = round_.pending
        timeout = self._config.evaluation_sample_timeout_s
        ready, _ = self._ray.wait(list(pending.values()), num_returns=len(pending), timeout=timeout) if pending else ([], [])
        done = set(ready)
        late = sorted(index for index, ref in pending.items() if ref not in done)
        if late:
            logger.warning(
                "evaluation runners %s did not finish within evaluation_sample_timeout_s=%s; their episodes are left out "
                "and they are restarted. Evaluate fewer episodes (evaluation_duration) or raise the timeout.",
                late, timeout,
            )  # fmt: skip
            self._failed.update(late)
        finished = {index: ref for index, ref in pending.items() if index not in late}
        return round_.episodes + [episode for episodes in self._gather(finished).values() for episode in episodes]

    def get_metrics(self) -> list[EpisodeSummary]:
        """Episodes finished on every runner since the last call."""
        episodes, self._episodes = self._episodes, []
        return self.local_env_runner.get_metrics() + episodes

    def foreach_env_runner(
        self,
        fn: Callable[[AnyEnvRunner], Any],
        *,
        local_env_runner: bool = True,
        remote_worker_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """``fn(runner)`` on every runner: the local one first, then the healthy remote ones by index.

        A remote runner that fails is handled as in sampling (replaced,
        dropped or reported); its result is left out.

        Args:
            local_env_runner: include the local runner.
            remote_worker_ids: only these remote runners (1..num_env_runners).
        """
        results = [self.local_env_runner.apply(fn)] if local_env_runner else []
        if self._remote:
            healthy = self.healthy_remote_ids()
            wanted = healthy if remote_worker_ids is None else [i for i in remote_worker_ids if i in healthy]
            results += list(self._gather({i: self._remote[i].apply.remote(fn) for i in wanted}).values())
        return results

    foreach_worker = foreach_env_runner
    """RLlib's older name."""

    def foreach_env_runner_with_id(
        self,
        fn: Callable[[int, AnyEnvRunner], Any],
        *,
        local_env_runner: bool = True,
        remote_worker_ids: Sequence[int] | None = None,
    ) -> list[Any]:
        """``fn(index, runner)`` on every runner, as :meth:`foreach_env_runner` (RLlib's order, the id first; the local one is 0).

        Args:
            fn: called with each runner's worker index and the runner.
            local_env_runner: include the local runner.
            remote_worker_ids: only these remote runners (1..num_env_runners).

        Raises:
            ConfigError: ``fn`` takes ``(runner, index)``: it looked up a runner's attribute on the index.
        """
        call = functools.partial(_call_with_index, fn, True)
        return self.foreach_env_runner(call, local_env_runner=local_env_runner, remote_worker_ids=remote_worker_ids)

    foreach_worker_with_id = foreach_env_runner_with_id
    """RLlib's older name."""

    def foreach_env_runner_with_index(
        self, fn: Callable[[AnyEnvRunner, int], Any], *, local_env_runner: bool = True
    ) -> list[Any]:
        """``fn(runner, index)`` on every runner, as :meth:`foreach_env_runner` (the local runner's index is 0).

        Args:
            fn: called with each runner and its worker index.
            local_env_runner: include the local runner.

        Raises:
            ConfigError: ``fn`` takes ``(index, runner)``: it looked up a runner's attribute on the index.
        """
        return self.foreach_env_runner(functools.partial(_call_with_index, fn, False), local_env_runner=local_env_runner)

    foreach_worker_with_index = foreach_env_runner_with_index
    """RLlib's older name."""

    def foreach_env(self, fn: Callable[[Any], Any]) -> list[list[Any]]:
        """``fn(env)`` on every sub-environment of every runner, as RLlib's ``workers.foreach_env``.

        Args:
            fn: called with each sub-environment as the user made it (see ``EnvRunner.foreach_env``).

        Returns:
            A list per runner (the local one first), of what ``fn`` returned for each of its sub-environments.
        """
        return self.foreach_env_runner(functools.partial(_foreach_env, fn))

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
            self._gather({i: self._remote[i].update_policies.remote(config, added, removed) for i in self.healthy_remote_ids()})

    def get_state(self) -> dict[str, Any]:
        """The local runner's state and each healthy remote runner's, by worker index (JSON).

        The remote runners' states include their policy copies' generators.
        """
        remote = self._gather({i: self._remote[i].get_state.remote() for i in self.healthy_remote_ids()}) if self._remote else {}
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
                raise ValueError(f"remote env runner {index} could not take its state: {_first_line(exc)}") from exc

    def stop(self) -> None:
        """Close every runner's environments and release every actor this group started."""
        self.local_env_runner.stop()
        # a graceful stop first (closes envs, removes policy files); a runner that does not answer is killed anyway
        pending = [self._remote[index].stop.remote() for index in self.healthy_remote_ids()]
        if pending:
            self._ray.wait(pending, num_returns=len(pending), timeout=STOP_TIMEOUT_S)
        for actor in self._remote.values():
            self._ray.kill(actor)
        self._remote.clear()
        self._failed.clear()

    # ------------------------------------------------------------------ #
    # remote runners and their failures (also for the asynchronous sampler)
    # ------------------------------------------------------------------ #
    def healthy_remote_ids(self) -> list[int]:
        """Indexes (1..num_env_runners) of the remote runners currently alive."""
        return [index for index in sorted(self._remote) if index not in self._failed]

    def remote_env_runner(self, index: int) -> Any:
        """The actor handle of remote runner ``index`` (a new handle after it is replaced)."""
        return self._remote[index]

    def accept(self, result: RemoteSample) -> MultiAgentBatch:
        """Take in a remote sample call's result; returns its batch.

        Its episodes are kept for the next :meth:`get_metrics`, its observation
        statistics go into the learner's filters, and each learner policy's
        timestep advances as its remote copy's did, so schedules stay in step.
        """
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
            logger.warning("%s failed and will be replaced: %s", what, _first_line(exc))
            self._failed.add(index)
        elif self._config.ignore_env_runner_failures:
            logger.warning("%s failed and is dropped; %d remain: %s", what, self.num_healthy_remote_runners - 1, _first_line(exc))
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
        ready, _ = self._ray.wait(list(pings.values()), num_returns=len(pings), timeout=timeout)
        answered = set(ready)
        for index, ref in pings.items():
            # an answer is no success that ends a run of failures: only a call that did work is
            try:
                if ref not in answered:
                    raise TimeoutError(f"no answer to a health probe within worker_health_probe_timeout_s={timeout}")
                self._ray.get(ref)
            except (TimeoutError, self._ray.exceptions.RayError) as exc:
                self.handle_failure(index, exc)

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

    def sampling_state(self, changed_since: int | None = None) -> dict[str, dict[str, Any]]:
        """The learner policies' :meth:`~corral.core.learning.policy.Policy.get_sampling_state`, by policy id.

        Args:
            changed_since: the policy map's eviction count at a publication every runner
                received; only the policies that may have changed since are included:
                those in memory, and those moved to disk after it (a policy on disk does
                not change). None: every policy, whether in memory or not.

        Returns:
            The states by policy id.
        """
        policies = self._policy_map()
        ids = list(policies) if changed_since is None else [*policies.loaded(), *policies.moved_out_since(changed_since)]
        return {policy_id: policies[policy_id].get_sampling_state() for policy_id in ids}

    def _policy_map(self) -> PolicyMap:
        """The learner's policies, which the local runner shares (the algorithm built it with them)."""
        policies = self.local_env_runner.policies
        assert isinstance(policies, PolicyMap)
        return policies

    def _start(self, index: int) -> Any:
        from corral.core.sampling.remote_env_runner import start_env_runner

        assert self._config is not None and self._policy_builds is not None
        return start_env_runner(self._config, self._policy_builds, index, self._stream)

    def _gather(self, pending: dict[int, Any]) -> dict[int, Any]:
        """Wait for every call; a failed one is handled by the fault-tolerance options and left out."""
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


def _plain(exc: BaseException) -> str:
    """The exception's text without the terminal colours Ray adds."""
    return re.sub(r"\x1b\[[0-9;]*m", "", str(exc))


def _first_line(exc: BaseException) -> str:
    lines = _plain(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

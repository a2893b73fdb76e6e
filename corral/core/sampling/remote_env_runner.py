"""An env runner in a Ray actor: its own envs and policy copies, acting with broadcast weights.

Ray is imported only here and only when ``num_env_runners > 0``: with the
default of 0 nothing in this module runs. Ray starts locally unless a cluster
is running or ``RAY_ADDRESS`` names one.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from corral.core.common.sample_batch import MultiAgentBatch
from corral.core.contracts.config import AlgorithmConfig
from corral.core.learning.learners.learner_group import ensure_ray
from corral.core.learning.policies.updates import Gradients
from corral.core.learning.policy import Policy, PolicyBuild
from corral.core.sampling.metrics import EpisodeSummary


class RemoteSample(NamedTuple):
    """What one remote sample call returns to the driver."""

    batch: MultiAgentBatch
    episodes: list[EpisodeSummary]
    """episodes that finished during the call"""
    filter_deltas: dict[str, dict[str, Any]]
    """by policy id, the observation-filter statistics gathered during the call (``MeanStdFilter.take_delta``)"""
    timesteps: dict[str, int]
    """by policy id, how far the policy's ``global_timestep`` advanced during the call"""
    gradients: dict[str, tuple[Gradients, dict[str, Any]]] | None = None
    """from :meth:`EnvRunnerActor.sample_gradients`: by policy to train, the gradients of its update on the
    call's samples and the update's stats (``batch`` then only counts the steps)"""


class EnvRunnerActor:
    """The body of a remote env runner (wrapped with ``ray.remote`` by :func:`start_env_runner`).

    Builds the same env runner and policies the local process has, from the
    config and the policy builds, and samples with whatever weights the driver
    last broadcast. Its policies live on the device its own actor reserved
    (``num_gpus_per_env_runner``), not on the learner's.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        policy_builds: dict[str, PolicyBuild],
        worker_index: int,
        stream: str,
        env_creators: dict[str, Any] | None = None,
        model_classes: dict[str, type] | None = None,
    ) -> None:
        from corral.core.contracts.callbacks import CallbackRunner, installed_hook_plugins
        from corral.core.contracts.options.model_names import is_action_dist_class, register_model_class
        from corral.core.devices import env_runner_device
        from corral.core.environments.envs import register_env
        from corral.core.learning.policy_map import PolicyMap
        from corral.core.sampling.multi_agent_env_runner import make_env_runner
        from corral.core.threads import TorchThreads

        for name, creator in (env_creators or {}).items():  # this process's registry starts empty
            register_env(name, creator)
        for name, cls in (model_classes or {}).items():  # and so does its custom models' (ModelCatalog)
            register_model_class(name, cls, action_dist=is_action_dist_class(cls))

        TorchThreads(config.num_torch_threads)  # "auto": the CPUs this actor reserved
        self._builds: dict[str, PolicyBuild] = {}
        self._stream = stream
        self.device = env_runner_device(config)
        """where this runner's policy copies act: its own GPU if its actor reserved one, else the CPU"""
        self.policies = PolicyMap(config.policy_map_capacity, self._rebuild, on_load=self._loaded, on_evict=self._evicted)
        # what the copies have not reported to the learner yet: timesteps counted from the last
        # report (or load), and what copies moved to disk took with them (steps, filter deltas)
        self._reported_timestep: dict[str, int] = {}
        self._unreported_steps: dict[str, int] = {}
        self._held_filter_deltas: dict[str, dict[str, Any]] = {}
        callbacks = CallbackRunner(config.callbacks_class, installed_hook_plugins())
        self.runner = make_env_runner(config, self.policies, worker_index, callbacks, seed=config.seed, stream=stream)
        for policy_id, build in policy_builds.items():
            self.add_policy(policy_id, build)

    def add_policy(self, policy_id: str, build: PolicyBuild) -> None:
        """Build a copy of a policy here (its weights come with the next broadcast).

        Args:
            policy_id: the policy's id.
            build: how the learner's copy was built.
        """
        self._builds[policy_id] = build
        policy = self.policies[policy_id] = self._rebuild(policy_id)
        self.runner.callbacks.create_policy(policy_id, policy)

    def _rebuild(self, policy_id: str) -> Policy:
        return self._builds[policy_id].build(policy_id, self._stream, self.runner.worker_index, self.device)

    def _loaded(self, policy_id: str, policy: Policy) -> None:
        if policy.observation_filter is not None:
            policy.observation_filter.keeps_delta = True  # what this runner sees goes to the learner
            held = self._held_filter_deltas.pop(policy_id, None)
            if held is not None:
                policy.observation_filter.restore_delta(held)  # one delta per report, as if it had stayed
        self._reported_timestep[policy_id] = policy.global_timestep

    def _evicted(self, policy_id: str, policy: Policy) -> None:
        steps = policy.global_timestep - self._reported_timestep.pop(policy_id)
        self._unreported_steps[policy_id] = self._unreported_steps.get(policy_id, 0) + steps
        if policy.observation_filter is not None:
            self._held_filter_deltas[policy_id] = policy.observation_filter.take_delta()

    def update_policies(self, config: AlgorithmConfig, added: dict[str, PolicyBuild], removed: list[str]) -> None:
        """Take the algorithm's new config and policy set (see ``EnvRunnerGroup.update_policies``).

        Args:
            config: the algorithm's new config.
            added: builds of the new policies, by id.
            removed: ids of the policies removed.
        """
        self.runner.config = config
        for policy_id in removed:
            if policy_id in self.policies:
                del self.policies[policy_id]  # without loading it, if it is on disk
            for unreported in (self._builds, self._reported_timestep, self._unreported_steps, self._held_filter_deltas):
                unreported.pop(policy_id, None)
            self.runner.forget_policy(policy_id)
        for policy_id, build in added.items():
            self.add_policy(policy_id, build)

    def _take(self, sampling_state: dict[str, dict[str, Any]] | None) -> None:
        for policy_id, state in (sampling_state or {}).items():
            if policy_id in self.policies:
                policy = self.policies[policy_id]
                policy.set_sampling_state(state)
                self._reported_timestep[policy_id] = policy.global_timestep  # the learner's count: nothing to report

    def sample(self, sampling_state: dict[str, dict[str, Any]] | None, num_steps: int | None = None) -> RemoteSample:
        """One sample call with the broadcast policy states, by policy id (None: keep the last ones).

        Args:
            sampling_state: the learner policies' states to act with, or None.
            num_steps: steps per sub-environment; default the config's rollout fragment length.
        """
        self._take(sampling_state)
        batch = self.runner.sample(num_steps)
        timesteps, deltas = self._unreported_steps, self._held_filter_deltas
        self._unreported_steps, self._held_filter_deltas = {}, {}
        for pid, policy in self.policies.loaded().items():
            timesteps[pid] = timesteps.get(pid, 0) + policy.global_timestep - self._reported_timestep[pid]
            self._reported_timestep[pid] = policy.global_timestep
            if policy.observation_filter is not None:
                deltas[pid] = policy.observation_filter.take_delta()
        return RemoteSample(batch, self.runner.get_metrics(), deltas, timesteps)

    def sample_gradients(self, sampling_state: dict[str, dict[str, Any]] | None) -> RemoteSample:
        """One sample call, then each policy to train computes its update's gradients on its own rows (A3C).

        The samples stay here: the batch returned only counts their steps.
        Each policy's ``on_learn_on_batch`` callback runs here, before its
        gradients are computed, as it runs before an update on the learner.

        Args:
            sampling_state: the learner policies' states to act with, or None (keep the last ones).
        """
        from corral.core.contracts.multi_agent_config import is_policy_to_train

        result = self.sample(sampling_state)
        gradients = {}
        for policy_id, batch in result.batch.policy_batches.items():
            if policy_id in self.policies and is_policy_to_train(self.runner.config, policy_id, batch):
                policy = self.policies[policy_id]
                custom_metrics: dict[str, Any] = {}
                self.runner.callbacks.learn_on_batch(policy, batch, custom_metrics)
                grads, update_stats = policy.compute_gradients(batch)
                gradients[policy_id] = (grads, {**update_stats, "custom_metrics": custom_metrics})
        steps = MultiAgentBatch({}, result.batch.env_steps, result.batch.agent_steps)
        return result._replace(batch=steps, gradients=gradients)

    def run_episodes(self, sampling_state: dict[str, dict[str, Any]], explore: bool, **span: int) -> list[EpisodeSummary]:
        """Evaluate with the broadcast policy state for ``span`` (``num_episodes=`` or ``num_steps=``).

        Args:
            sampling_state: the learner policies' :meth:`Policy.get_sampling_state` by id, loaded first.
            explore: act with exploration; False acts deterministically.
            **span: ``num_episodes=`` or ``num_steps=``, as :func:`evaluation_span` gives them.

        Returns:
            The finished episodes (see :meth:`EnvRunner.run_episodes`).
        """
        self._take(sampling_state)
        return self.runner.run_episodes(explore=explore, **span)

    def apply(self, fn: Any) -> Any:
        """``fn(runner)`` here, for ``foreach_env_runner``."""
        return self.runner.apply(fn)

    def get_state(self) -> dict[str, Any]:
        """The runner's state and its policy copies' generators (see :meth:`EnvRunner.get_state`), as JSON."""
        from corral.core.common import state_codec

        policies = {pid: state_codec.encode(p.get_rng_state()) for pid, p in self.policies.items()}
        return {"runner": self.runner.get_state(), "policies": policies}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`."""
        from corral.core.common import state_codec

        for pid, policy_state in state["policies"].items():
            self.policies[pid].set_rng_state(state_codec.decode(policy_state))
        self.runner.set_state(state["runner"])

    def ping(self) -> bool:
        """Answer, to show the actor is alive."""
        return True

    def stop(self) -> None:
        """Close the environments and remove the policies this runner moved to disk (the actor is killed next)."""
        self.runner.stop()
        self.policies.close()


def start_env_runner(config: AlgorithmConfig, policy_builds: dict[str, PolicyBuild], worker_index: int, stream: str) -> Any:
    """Start one remote env runner with the resources the config asks for; returns its actor handle.

    An env the config names by a ``corral.register_env`` name is registered in
    the runner's process too, with the same creator, and so is a custom model
    the config or a policy's config names by a ``ModelCatalog`` name.

    Args:
        config: the runner's config (the evaluation config for evaluation runners).
        policy_builds: how to build each policy, by id.
        worker_index: the runner's index, from 1.
        stream: ``"sampling"`` or ``"evaluation"``: with ``worker_index``, where its generators derive from.
    """
    from corral.core.contracts.options.model_names import model_classes_of
    from corral.core.devices import ray_gpus
    from corral.core.environments.envs import registered_creators

    ray = ensure_ray()
    actor_class = ray.remote(
        num_cpus=config.num_cpus_per_env_runner,
        num_gpus=ray_gpus(config.num_gpus_per_env_runner, config),
        resources=dict(config.custom_resources_per_env_runner) or None,
        max_restarts=0,
    )(EnvRunnerActor)
    models = model_classes_of(config, *(build.config for build in policy_builds.values()))
    return actor_class.remote(config, dict(policy_builds), worker_index, stream, registered_creators(config.env), models)

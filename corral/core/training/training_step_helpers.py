"""What an overridden ``training_step()`` calls, as RLlib's ``rollout_ops`` and ``train_ops`` name it.

An algorithm subclass that writes its own loop (two policies trained by two
algorithms' updates, a centralized critic, ...) samples with
:func:`synchronous_parallel_sample`, updates with :func:`train_one_step` and
returns its stats by policy id::

    class TwoTrainers(Algorithm):
        def training_step(self):
            batch = synchronous_parallel_sample(worker_set=self.env_runner_group, max_env_steps=200)
            self._counters["num_env_steps_sampled"] += batch.env_steps  # a multi-agent run's MultiAgentBatch
            return train_one_step(self, batch, ["ppo_policy"])

Each policy learns with its own algorithm's update (its class's
``learn_on_batch``, with its config's options), as RLlib's policies do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.core.results import learner_info

if TYPE_CHECKING:
    from corral.core.sampling.env_runner_group import EnvRunnerGroup
    from corral.core.training.algorithm import Algorithm


def synchronous_parallel_sample(
    *,
    worker_set: EnvRunnerGroup,
    max_agent_steps: int | None = None,
    max_env_steps: int | None = None,
    concat: bool = True,
) -> MultiAgentBatch | SampleBatch | list[MultiAgentBatch | SampleBatch]:
    """Sample on every remote env runner at once (on the local one without remote runners), until enough steps.

    Unlike :meth:`~corral.core.training.algorithm.Algorithm.sample`, the
    algorithm's counters are left alone, as in RLlib: the caller adds what it
    counts (``algo._counters["num_env_steps_sampled"] += batch.env_steps``).
    The episodes finished are reported in the iteration's result as usual.

    Args:
        worker_set: the env runners (``algo.env_runner_group``, or RLlib's name ``algo.workers``).
        max_agent_steps: sample rounds until at least this many agent steps; at most one of the two.
        max_env_steps: sample rounds until at least this many env steps; neither: one round.
        concat: join the batches into one; False: a list with each runner's batch of each round.

    Returns:
        The batch (a single-agent run's as its policy's ``SampleBatch``, as RLlib's runners return it), or the list.

    Raises:
        ValueError: both step limits were given.
    """
    if max_agent_steps is not None and max_env_steps is not None:
        raise ValueError("synchronous_parallel_sample takes max_agent_steps or max_env_steps, not both")
    limit, unit = (max_agent_steps, "agent_steps") if max_agent_steps is not None else (max_env_steps, "env_steps")
    batches: list[MultiAgentBatch] = []
    steps = 0
    while not batches or (limit is not None and steps < limit):
        round_ = worker_set.sample_each()
        batches.extend(round_)
        steps += sum(batch.count_in(unit) for batch in round_)
    single_agent = not worker_set.is_multi_agent
    if concat:
        joined = MultiAgentBatch.concat(batches)
        return joined.policy_batches[DEFAULT_POLICY_ID] if single_agent else joined
    return [batch.policy_batches[DEFAULT_POLICY_ID] for batch in batches] if single_agent else list(batches)


def standardize_fields(samples: SampleBatch | MultiAgentBatch, fields: list[str]) -> SampleBatch | MultiAgentBatch:
    """Shift and scale columns of every policy's batch to mean 0 and standard deviation 1 (advantages, say), in place.

    Args:
        samples: a policy's batch, or a multi-agent batch.
        fields: the columns; a batch without one is left as it is.

    Returns:
        ``samples``.
    """
    for batch in samples.policy_batches.values() if isinstance(samples, MultiAgentBatch) else [samples]:
        for field in fields:
            if field in batch:
                values = np.asarray(batch[field])
                batch[field] = (values - values.mean()) / max(float(values.std()), 1e-4)
    return samples


def train_one_step(
    algorithm: Algorithm, train_batch: SampleBatch | MultiAgentBatch, policies_to_train: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Update the policies on a batch, each with its own algorithm's update; count the steps trained.

    Args:
        algorithm: the algorithm whose policies learn.
        train_batch: a multi-agent batch, or the default policy's batch.
        policies_to_train: the policies to update; None: those the config trains
            (``policies_to_train``) among the batch's.

    Returns:
        Each updated policy's stats, by policy id in RLlib's layout (a result's ``info/learner``:
        :func:`~corral.core.results.learner_info`).
    """
    samples = train_batch if isinstance(train_batch, MultiAgentBatch) else train_batch.as_multi_agent()
    if policies_to_train is not None:
        chosen = {pid: batch for pid, batch in samples.policy_batches.items() if pid in policies_to_train}
        samples = MultiAgentBatch(chosen, samples.env_steps, sum(batch.count for batch in chosen.values()))
    return learner_info(algorithm.learn_on_batch(samples))


def multi_gpu_train_one_step(algorithm: Algorithm, train_batch: SampleBatch | MultiAgentBatch) -> dict[str, dict[str, Any]]:
    """RLlib's update through preloaded GPU towers: corral's :func:`train_one_step`, on each policy's own device.

    A policy moves its batch to the device it learns on (``num_gpus``) in its
    update, and ``learners(num_learners=N, num_gpus_per_learner=1)`` spreads
    it over N GPUs, so one path does both.

    Args:
        algorithm: the algorithm whose policies learn.
        train_batch: a multi-agent batch, or the default policy's batch.

    Returns:
        Each updated policy's stats.
    """
    return train_one_step(algorithm, train_batch)

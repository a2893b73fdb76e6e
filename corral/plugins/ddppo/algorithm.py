"""The DD-PPO algorithm: every remote env runner samples and learns PPO on its own samples, averaging gradients.

RLlib's decentralized distributed PPO. The runners join one
``torch.distributed`` process group when the algorithm is built and start
from the main process's policy state; each round, every runner samples a
fragment on each of its sub-environments, computes PPO's advantages, and
makes PPO's minibatch epochs on its own rows. Its gradients are averaged with
the others' at every step (weighted by their rows; a runner with fewer rows
adds empty minibatches at the end, so all make as many steps), so the
runners' weights stay identical without any weights being sent. The main
process counts, reports, and (``keep_local_weights_in_sync``) copies the
first runner's policy state back for checkpoints and evaluation.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from corral.core import PLUGIN_API_VERSION, ConfigError, MultiAgentBatch
from corral.core.learning.learners.gradient_sync import GradientSync
from corral.core.learning.learners.learner_actor import join_process_group, meeting_address
from corral.core.learning.learners.learner_group import mean_stats
from corral.plugins.ddppo.config import DDPPOConfig
from corral.plugins.ppo import PPO


class DDPPO(PPO):
    """Decentralized distributed PPO: sampling and learning on every remote env runner, gradients all-reduced."""

    config_class = DDPPOConfig
    config: DDPPOConfig
    corral_api = PLUGIN_API_VERSION

    def setup(self, config: Any = None) -> None:
        """Join the remote runners into one process group and give them the main process's policy state.

        Raises:
            ConfigError: more than one policy (each runner would need the same ones in every batch).
        """
        super().setup()
        if len(self.policy_builds) != 1:
            raise ConfigError(
                f"DD-PPO learns one policy, this config has {len(self.policy_builds)} ({', '.join(sorted(self.policy_builds))}); "
                "train several policies with PPO and learners(num_learners=N)"
            )
        group = self.env_runner_group
        runners = group.healthy_remote_ids()
        (host, port), *_ = group.foreach_env_runner(_meeting_address, local_env_runner=False, remote_worker_ids=runners[:1])
        ranks = {index: rank for rank, index in enumerate(runners)}
        group.foreach_env_runner_with_id(functools.partial(_join, host, port, ranks), local_env_runner=False)
        self._push_policy_states()

    def training_step(self) -> dict[str, dict[str, Any]]:
        """One round: every runner samples and learns; the main process counts, reports and keeps a copy."""
        group = self.env_runner_group
        rounds = group.foreach_env_runner(
            functools.partial(_sample_and_learn, self.counters["num_env_steps_sampled"]), local_env_runner=False
        )
        learner: dict[str, list[dict[str, Any]]] = {}
        for env_steps, agent_steps, stats, episodes in rounds:
            for key, steps in (("env", env_steps), ("agent", agent_steps)):
                self.counters[f"num_{key}_steps_sampled"] += steps
                self.counters[f"num_{key}_steps_trained"] += steps
            group.add_metrics(episodes)
            for policy_id, policy_stats in stats.items():
                learner.setdefault(policy_id, []).append(policy_stats)
        if self.config.keep_local_weights_in_sync:
            (states,) = group.foreach_env_runner(
                _policy_states, local_env_runner=False, remote_worker_ids=group.healthy_remote_ids()[:1]
            )
            for policy_id, state in states.items():
                self.policies[policy_id].set_state(state)
        return {policy_id: mean_stats(each) for policy_id, each in learner.items()}

    def learn_on_batch(self, samples: MultiAgentBatch) -> dict[str, dict[str, Any]]:
        """Refused: DD-PPO's policies learn on the runners that sampled.

        Raises:
            ConfigError: always, with what to use.
        """
        raise ConfigError(
            "DD-PPO learns on its env runners, each on what it sampled; call train(), or use PPO to learn on a batch here"
        )

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore, and give the runners the restored policy states (their weights and optimizers)."""
        super().set_state(state)
        self._push_policy_states()

    def _push_policy_states(self) -> None:
        states = {policy_id: policy.get_state() for policy_id, policy in self.policies.loaded().items()}
        self.env_runner_group.foreach_env_runner(functools.partial(_set_policy_states, states), local_env_runner=False)


def _meeting_address(runner: Any) -> tuple[str, int]:
    """On the first runner: where the group meets."""
    return meeting_address()


def _join(host: str, port: int, ranks: dict[int, int], index: int, runner: Any) -> None:
    """On each runner: join the process group; its policies then average their gradients with the others'."""
    cpu = torch.device("cpu")  # gloo, which reduces CPU tensors: a runner's policy on a GPU averages through the CPU
    join_process_group(host, port, ranks[index], len(ranks), cpu)
    for policy in runner.policies.values():
        policy.gradient_sync = GradientSync(ranks[index], len(ranks), cpu, shares_batch=False)


def _set_policy_states(states: dict[str, dict[str, Any]], runner: Any) -> None:
    """On each runner: take the main process's policy states."""
    for policy_id, state in states.items():
        runner.policies[policy_id].set_state(state)


def _policy_states(runner: Any) -> dict[str, dict[str, Any]]:
    """On a runner: its policies' states."""
    return {policy_id: policy.get_state() for policy_id, policy in runner.policies.items()}


def _sample_and_learn(timestep: int, runner: Any) -> tuple[int, int, dict[str, dict[str, Any]], list[Any]]:
    """On each runner: sample one fragment per sub-environment and learn PPO's epochs on it with the others.

    Every runner's policy takes the main process's step count first, so schedules (``lr_schedule``,
    ``entropy_coeff_schedule``) read the same value on all of them and their steps stay alike.
    """
    batch = runner.sample()
    stats = {}
    for policy_id, rows in batch.policy_batches.items():
        policy = runner.policies[policy_id]
        policy.global_timestep = timestep
        stats[policy_id] = policy.learn_and_report(rows)
    return batch.env_steps, batch.agent_steps, stats, runner.get_metrics()

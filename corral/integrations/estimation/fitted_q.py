"""Fitted Q evaluation (Le et al., 2019): a Q model of the target policy, learned from the behaviour's transitions."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.config import ModelConfig
from corral.core.networks.default_models import build_encoder
from corral.core.seeding import torch_generator
from corral.errors import ConfigError

Q_MODEL_DEFAULTS: dict[str, Any] = {"n_iters": 1, "lr": 1e-3, "minibatch_size": 128, "tau": 1.0, "fcnet_hiddens": [32, 32]}
"""``q_model_config``: passes over the episodes per evaluation, Adam's learning rate, rows per step,
the target network's update rate per pass, and the network's hidden layers"""


class FittedQ:
    """Q(s, a) for every Discrete action, fitted to r + gamma * E_{a' ~ target}[Q_target(s', a')].

    Each :meth:`train` makes ``n_iters`` passes over the transitions in
    minibatches, then moves the target network ``tau`` of the way; the model
    keeps learning from one evaluation to the next.

    Args:
        policy: the target policy (its observation and Discrete action spaces, its action probabilities).
        gamma: the discount.
        q_model_config: see :data:`Q_MODEL_DEFAULTS`.

    Raises:
        ConfigError: an unknown key in ``q_model_config``.
    """

    def __init__(self, policy: Any, gamma: float, q_model_config: dict[str, Any] | None = None) -> None:
        unknown = sorted(set(q_model_config or {}) - set(Q_MODEL_DEFAULTS))
        if unknown:
            raise ConfigError(f"q_model_config has no key {unknown[0]!r}; its keys: {', '.join(Q_MODEL_DEFAULTS)}")
        self.options = {**Q_MODEL_DEFAULTS, **(q_model_config or {})}
        self.policy = policy
        self.gamma = gamma
        self.num_actions = int(policy.action_adapter.policy_space.n)
        seed = policy.config.seed
        self.generator = torch_generator(seed, "fitted_q")
        with torch.random.fork_rng():
            if seed is not None:
                torch.manual_seed(int(torch.randint(2**62, (1,), generator=self.generator)))
            model_config = ModelConfig(fcnet_hiddens=self.options["fcnet_hiddens"], fcnet_activation="relu")
            encoder, features = build_encoder(policy.model_observation_space, model_config)
            self.model = nn.Sequential(encoder, nn.Linear(features, self.num_actions))
        self.target = copy.deepcopy(self.model).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.options["lr"])

    def action_probabilities(self, obs: np.ndarray) -> np.ndarray:
        """The target policy's ``[B, n]`` probability of every action (one forward pass over every pair)."""
        rows, n = len(obs), self.num_actions
        pairs = np.concatenate([obs] * n)  # action a's rows are block a
        logp = self.policy.compute_log_likelihoods(pairs, np.repeat(np.arange(n, dtype=np.int64), rows))
        probabilities: np.ndarray = np.exp(logp.reshape(n, rows).T)
        return probabilities.astype(np.float32)

    def train(self, rows: dict[str, np.ndarray]) -> dict[str, float]:
        """``n_iters`` passes of minibatch TD regression on the transitions.

        Args:
            rows: ``obs``, ``actions``, ``rewards``, ``new_obs`` and ``terminateds``.

        Returns:
            ``{"q_loss": the last pass's mean loss}``.
        """
        obs = torch.from_numpy(np.asarray(rows[SampleBatch.OBS], np.float32))
        next_obs = np.asarray(rows[SampleBatch.NEXT_OBS], np.float32)
        next_probs = torch.from_numpy(self.action_probabilities(next_obs))
        next_obs_t = torch.from_numpy(next_obs)
        actions = torch.from_numpy(np.asarray(rows[SampleBatch.ACTIONS], np.int64))
        rewards = torch.from_numpy(np.asarray(rows[SampleBatch.REWARDS], np.float32))
        continues = torch.from_numpy(1.0 - np.asarray(rows[SampleBatch.TERMINATEDS], np.float32))
        size = self.options["minibatch_size"]
        losses: list[float] = []
        for _ in range(self.options["n_iters"]):
            with torch.no_grad():
                targets = rewards + self.gamma * continues * (next_probs * self.target(next_obs_t)).sum(-1)
            losses = []
            # torch's Python Tensor.split is unannotated (it shadows the typed one in torch's C stub)
            for chunk in torch.randperm(len(obs), generator=self.generator).split(size):  # type: ignore[no-untyped-call]
                q = self.model(obs[chunk]).gather(1, actions[chunk, None]).squeeze(1)
                loss = 0.5 * (q - targets[chunk]).pow(2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                losses.append(float(loss.detach()))
            with torch.no_grad():
                for target, online in zip(self.target.parameters(), self.model.parameters(), strict=True):
                    target.lerp_(online, self.options["tau"])
        return {"q_loss": float(np.mean(losses)) if losses else float("nan")}

    @torch.no_grad()
    def q_and_v(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Q(s, a) of the taken actions and V(s) = E_{a ~ target}[Q(s, a)].

        Args:
            obs: ``[B, ...]`` observations.
            actions: ``[B]`` actions.

        Returns:
            ``(q, v)``, each ``[B]`` float64.
        """
        q_all = self.model(torch.from_numpy(np.asarray(obs, np.float32))).numpy().astype(np.float64)
        v = (self.action_probabilities(obs) * q_all).sum(-1)
        return q_all[np.arange(len(actions)), actions.astype(np.int64)], v

"""Proximal Policy Optimization (Schulman et al., 2017) as a corral plugin."""

from corral.plugins.ppo.algorithm import PPO
from corral.plugins.ppo.config import PPOConfig
from corral.plugins.ppo.policy import PPOPolicy, PPOTorchLearner

__all__ = ["PPO", "PPOConfig", "PPOPolicy", "PPOTorchLearner"]

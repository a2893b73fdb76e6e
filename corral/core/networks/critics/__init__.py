"""Q-function networks that several replay-based algorithms share (SAC and CQL, DDPG and TD3)."""

from corral.core.networks.critics.ensemble import EnsembleCritic, EnsembleLinear

__all__ = ["EnsembleCritic", "EnsembleLinear"]

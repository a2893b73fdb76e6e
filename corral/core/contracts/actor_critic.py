"""The options every actor-critic loss shares, written once.

PPO, A2C, IMPALA and third-party actor-critic plugins inherit them instead of
declaring them again; each sets its own defaults with ``defaults={...}``.
"""

from __future__ import annotations

from corral.core.contracts.config import AlgorithmConfig, option


class ActorCriticConfig(AlgorithmConfig):
    """The weights of an actor-critic loss: policy loss + vf_loss_coeff * value loss - entropy_coeff * entropy."""

    vf_loss_coeff: float = option(0.5, "training", ge=0)
    """weight of the value loss in the total loss"""
    entropy_coeff: float = option(0.0, "training", ge=0)
    """weight of the entropy bonus in the total loss (a list of [timestep, value] sets entropy_coeff_schedule)"""
    entropy_coeff_schedule: list[tuple[int, float]] | None = option(None, "training")
    """piecewise-linear entropy coefficient over the policy's timesteps, [[timestep, value], ...]; overrides
    entropy_coeff"""


class GAEConfig(ActorCriticConfig):
    """An actor-critic whose advantages are generalised advantage estimates over each rollout fragment."""

    lambda_: float = option(1.0, "training", ge=0, le=1)
    """the GAE lambda: 1 gives Monte-Carlo (n-step) returns within the fragment, 0 one-step TD errors"""
    use_gae: bool = option(True, "training")
    """advantages by GAE(lambda_); False: the n-step return within the fragment less the value (GAE with lambda 1)"""
    normalize_advantages: bool = option(True, "training")
    """standardise advantages over each train batch"""

"""A2C's update: one gradient step on policy gradient, value and entropy terms per batch."""

from __future__ import annotations

from corral.core import ActorCriticPolicy
from corral.plugins.a2c.config import A2CConfig


class A2CPolicy(ActorCriticPolicy):
    """Actor-critic policy with one synchronous update per train batch (the actor-critic policy's ``learn_on_batch``)."""

    config: A2CConfig
    thread_safe_learning = True
    data_parallel_learning = True
    recurrent_models = True

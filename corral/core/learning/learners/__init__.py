"""Learners: data-parallel updates of a policy set by N processes whose gradients are averaged (RLlib's LearnerGroup)."""

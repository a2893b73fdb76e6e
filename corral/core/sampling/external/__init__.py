"""Sampling environments that run their own loop (:class:`~corral.core.environments.external_env.ExternalEnv`)."""

"""The contracts: what a user declares and a plugin extends, above the shared types and below everything that runs.

``AlgorithmConfig`` (validated option groups), ``ModelConfig``, the shared
actor-critic options, ``PolicySpec`` and the multi-agent options, RLlib's
spellings of them (``rllib_compat``), and the callbacks and hook
specifications that observe a run. Nothing here imports another room but
``common``: a config names the plugins it needs (explorations, estimators) and
checks them through the registry, so the rooms that implement them sit above.
"""

"""The contracts: what an algorithm plugin implements or extends, and what it promises its users.

``Algorithm`` (the training loop, checkpoints, evaluation), ``AlgorithmConfig``
(validated option groups) and the shared actor-critic options, ``Policy`` (acting
and learning on one set of weights), ``Exploration``, the callbacks and hook
specifications that observe a run, and the keys every ``train()`` result has.
Everything else in the core serves these.
"""

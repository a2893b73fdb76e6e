"""The options of a config: how one is declared, and the option groups ``AlgorithmConfig`` is made of.

``declaring`` has :func:`option` (a field with its default, builder group and
constraints), the plain-data check and the limits the options share; the
groups follow RLlib's builder methods: ``sampling_options`` (``environment()``,
``env_runners()``), ``learning_options`` (``training()``, ``evaluation()``,
``exploration()``, ``callbacks()``) and ``run_options`` (``debugging()`` to
``offline_data()``); ``model_config`` is ``ModelConfig``, the ``model`` dict's
options. Reading a config's keys (``config_keys``: RLlib's spellings, unknown
keys) and the checks across options (``config_checks``) are here too.
"""

"""Every corral algorithm as a Ray Tune trainable, under its registered name.

``import corral.tune`` registers every installed algorithm (and every one
registered in-process with ``corral.register_algorithm``, also later ones) with
Tune, so that::

    import corral.tune
    from ray import tune

    config = corral.get_config("PPO").environment("CartPole-v1").training(lr=tune.grid_search([1e-3, 3e-4]))
    tuner = corral.tune.Tuner(                 # or ray.tune.Tuner: see Tuner
        "PPO", param_space=config, run_config=tune.RunConfig(stop={"episode_reward_mean": 475})
    )
    results = tuner.fit()

The param space is a config or its ``to_dict()``; what the script defines
itself (an env class, callbacks, a ``policy_mapping_fn``) reaches the trials by
value (:mod:`corral.core.common.by_value`), and envs registered with
``corral.register_env`` reach them through Tune's registry, where
``ray.tune.registry.register_env`` puts its own. Each trial builds the
algorithm from its config, one ``train()`` per Tune step; Tune checkpoints are
corral checkpoints (``Algorithm.from_checkpoint`` opens them, or
``result.checkpoint`` itself), and ``Tuner.restore`` resumes at the iteration
they hold. A trial reserves one CPU (plus ``num_gpus``) for the learner and a
bundle per remote env runner, so its actors are placed with it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import ray
from ray import tune
from ray.tune.execution.placement_groups import PlacementGroupFactory
from ray.tune.result import AUTO_RESULT_KEYS
from ray.tune.result_grid import ResultGrid

from corral import registry
from corral.core.common import by_value
from corral.core.contracts.config import AlgorithmConfig
from corral.core.contracts.options.model_names import share_models_with_tune
from corral.core.environments.envs import share_with_tune
from corral.core.results import RESULT_KEYS
from corral.core.training.algorithm import Algorithm
from corral.errors import ConfigError, did_you_mean

__all__ = ["CorralTrainable", "TrialsFailedError", "Tuner", "check_stop", "register_trainables", "trainable"]


class CorralTrainable(tune.Trainable):
    """A Tune trainable that runs one corral algorithm; :func:`trainable` makes one per algorithm class."""

    # A function rather than the class itself: Ray disassembles a trainable class with everything
    # it holds, and an algorithm class holds its config class, which holds it back: endless recursion.
    algorithm_class: ClassVar[staticmethod[[], type[Algorithm]]]

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        """A fresh config of the algorithm (``tune.registry.get_trainable_cls("PPO").get_default_config()``, as in RLlib)."""
        return cls.algorithm_class().get_default_config()

    def setup(self, config: dict[str, Any]) -> None:
        """Build the algorithm from the trial's config; its result files go into the trial's folder.

        A ``storage_path`` the param space sets wins; None (what ``to_dict()`` carries) is the trial's folder.
        Objects the driver's script wrote by value are unpickled: the param space is its own run's.
        """
        values = {**config}
        if values.get("storage_path") is None:
            values["storage_path"] = str(Path(self._trial_folder()) / "corral")
        with by_value.trusted():
            config_object = self.get_default_config().update_from_dict(values)
        self.algorithm = config_object.build()

    def _trial_folder(self) -> str:
        """The trial's folder under the run's storage path, where Tune keeps its results and checkpoints.

        Tune's own ``logdir`` is a working folder in Ray's session directory, uploaded only with
        ``SyncConfig(sync_artifacts=True)``; a storage path on the local disk is written to directly.
        """
        storage = getattr(self, "_storage", None)  # Ray's StorageContext: the trial's paths (no public accessor)
        if storage is not None and getattr(storage.storage_filesystem, "type_name", "") == "local":
            return str(storage.trial_fs_path)
        return str(self.logdir)

    def step(self) -> dict[str, Any]:
        """One ``train()`` call."""
        return self.algorithm.train()

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """Write a corral checkpoint into Tune's checkpoint folder."""
        self.algorithm.save(checkpoint_dir)

    def load_checkpoint(self, checkpoint: str | Mapping[str, Any] | None) -> None:
        """Restore weights, optimizers and counters from the corral checkpoint in Tune's folder."""
        self.algorithm.restore(str(checkpoint))

    def cleanup(self) -> None:
        """Stop the algorithm, releasing its env runner actors."""
        self.algorithm.stop()

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory:
        """What a trial reserves: the algorithm's :meth:`~corral.core.training.algorithm.Algorithm.default_resource_request`."""
        return cls.algorithm_class().default_resource_request(config)


def trainable(algorithm: str | type[Algorithm]) -> type[CorralTrainable]:
    """The Tune trainable class of an algorithm (a registered name or an ``Algorithm`` subclass)."""
    cls = registry.get_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    attributes = {"algorithm_class": staticmethod(lambda: cls), "__module__": __name__}
    return type(f"{cls.__name__}Trainable", (CorralTrainable,), attributes)


def register_trainables() -> list[str]:
    """Register every usable corral algorithm with Tune under its name; returns the names registered.

    Called on import. A plugin that fails to load is skipped (``corral list
    --check`` says why), so one broken plugin does not keep the others out.
    """
    names = []
    for info in registry.list_algorithms(check=True):
        if info.status == "ok":
            _register(info.name, registry.get_algorithm(info.name, dist=info.dist))
            names.append(info.name)
    return names


def check_stop(stop: Mapping[str, Any] | None) -> None:
    """Refuse stop criteria that name a key no result has, listing the keys there are.

    ``Tuner`` in this module calls it before any trial starts; ``ray.tune.Tuner``
    itself only notices after the first iteration. Nested keys
    (``"evaluation/episode_reward_mean"``) are checked at their top level.
    """
    if not isinstance(stop, Mapping):
        return  # a Stopper object or a function decides for itself
    known = [*RESULT_KEYS, *AUTO_RESULT_KEYS]
    for key in stop:
        top = str(key).split("/")[0]
        if top not in known:
            raise ConfigError(
                f"stop key {key!r} is not in corral's results.{did_you_mean(top, known)} "
                f"Results have: {', '.join(sorted(set(known)))}"
            )


class TrialsFailedError(tune.TuneError):
    """Trials of a :class:`Tuner` run raised; ``result_grid`` holds every trial, its ``errors`` what each raised."""

    def __init__(self, result_grid: ResultGrid) -> None:
        self.result_grid = result_grid
        failed = [result_grid[i] for i in range(len(result_grid)) if result_grid[i].error is not None]
        lines = "; ".join(f"{Path(str(result.path)).name}: {_first_line(result.error)}" for result in failed)
        super().__init__(
            f"{len(failed)} of {len(result_grid)} trials failed: {lines} (the tracebacks: result_grid.errors; "
            "corral.tune.Tuner(..., raise_on_failed_trial=False) returns the ResultGrid instead)"
        )


class Tuner(tune.Tuner):
    """``ray.tune.Tuner`` that checks the stop criteria before anything starts and raises when a trial failed.

    ``ray.tune.Tuner.fit()`` returns normally whatever the trials raised (they are in
    ``result_grid.errors``); this one raises :class:`TrialsFailedError`, so a script
    that runs it exits non-zero, as ``tune.run`` did by default.

    Args:
        trainable: the algorithm's registered name (or any Tune trainable).
        raise_on_failed_trial: False returns the ``ResultGrid`` with the errors, as ``ray.tune.Tuner`` does.
        **kwargs: as ``ray.tune.Tuner``'s; ``param_space`` may be a corral config.

    Raises:
        ConfigError: a stop key that no result has (see :func:`check_stop`).
    """

    def __init__(self, trainable: Any = None, *, raise_on_failed_trial: bool = True, **kwargs: Any) -> None:
        run_config = kwargs.get("run_config")
        check_stop(getattr(run_config, "stop", None))
        if isinstance(kwargs.get("param_space"), AlgorithmConfig):  # also where Tune has no _Config to register with
            kwargs["param_space"] = kwargs["param_space"].to_dict()
        self._raise_on_failed_trial = raise_on_failed_trial
        super().__init__(trainable, **kwargs)

    def fit(self) -> ResultGrid:
        """Run the trials; returns their results.

        Raises:
            TrialsFailedError: a trial raised (unless ``raise_on_failed_trial=False``).
        """
        results = super().fit()
        if self._raise_on_failed_trial and results.errors:
            raise TrialsFailedError(results)
        return results


def _first_line(error: BaseException | None) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__


_registered: dict[str, type[Algorithm]] = {}


def _register(name: str, cls: type[Algorithm]) -> None:
    _registered[name] = cls
    tune.register_trainable(name, trainable(cls))


def _register_again() -> None:
    """After a new ``ray.init`` in this process: Tune's registry lives in the cluster and went with the old one."""
    for name, cls in _registered.items():
        tune.register_trainable(name, trainable(cls))
    share_with_tune()
    share_models_with_tune()


def _register_config_class() -> None:
    """Let Tune take a corral config as ``param_space`` (Tune calls ``to_dict()`` on configs of its ``_Config`` kind)."""
    from ray.tune import tune as tune_module  # the module, where Tune keeps its config base class

    config_kind = getattr(tune_module, "_Config", None)
    if config_kind is not None and hasattr(config_kind, "register"):
        config_kind.register(AlgorithmConfig)


def _take_algorithm_classes() -> None:
    """Let Tune take an ``Algorithm`` subclass wherever it takes a trainable, as RLlib's algorithms are Trainables.

    ``ray.tune.Tuner(MyAlgo, ...)``, ``tune.run(MyAlgo)`` and ``tune.register_trainable("x", MyAlgo)``
    all register through ``ray.tune.registry.register_trainable``, which refuses a class that is no
    ``Trainable``. Corral's algorithms do not import Ray, so the function that registers them turns
    an algorithm class into its :func:`trainable` first (bound again where Tune imported it by name).
    """
    from ray.tune import registry as tune_registry
    from ray.tune.experiment import experiment as experiment_module

    original: Callable[..., None] = tune_registry.register_trainable
    if getattr(original, "takes_algorithm_classes", False):
        return

    @functools.wraps(original)
    def register_trainable(name: str, trainable_object: Any, warn: bool = True) -> None:
        if isinstance(trainable_object, type) and issubclass(trainable_object, Algorithm):
            trainable_object = trainable(trainable_object)
        original(name, trainable_object, warn=warn)

    register_trainable.takes_algorithm_classes = True  # type: ignore[attr-defined]
    for module in (tune_registry, experiment_module, tune):
        module.register_trainable = register_trainable  # type: ignore[attr-defined]


_take_algorithm_classes()
register_trainables()
registry.on_algorithm_registered(_register)
_register_config_class()
share_with_tune()  # the envs registered with corral before this import; register_env shares later ones itself
share_models_with_tune()  # and the custom models registered with ModelCatalog
# Tune re-registers its own trainables the same way (a private list, so only if it exists).
getattr(ray._private.worker, "_post_init_hooks", []).append(_register_again)

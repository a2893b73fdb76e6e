"""Which algorithm class a checkpoint names, found without importing the training room."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from corral._lazy import is_subclass_of_loaded
from corral.core.common.import_paths import import_object
from corral.core.persistence import checkpoints
from corral.core.persistence.safe_loading import check_outside
from corral.errors import CheckpointError, ConfigError, CorralError, PluginLoadError, UnknownPluginError

if TYPE_CHECKING:  # the class returned; the training room imports this one
    from corral.core.training.algorithm import Algorithm


def algorithm_class_of(ckpt: checkpoints.Checkpoint, trust_code: bool) -> type[Algorithm]:
    """The registered algorithm a checkpoint names, from the distribution it records if several provide it.

    Found through the registry (or, with ``trust_code``, the class path the
    checkpoint records), so that a policy reopens from an algorithm checkpoint
    without this room importing the algorithms above it.

    Args:
        ckpt: an algorithm checkpoint, read.
        trust_code: import the recorded class path if no installed plugin has the name.

    Returns:
        The algorithm class.

    Raises:
        CheckpointError: the algorithm is not installed (or its plugin fails to load), or the
            recorded class is not a corral Algorithm.
    """
    import corral.registry as registry

    meta = ckpt.meta
    name, dist, path = meta["algorithm"], meta.get("distribution"), meta.get("algorithm_class")
    try:
        return registry.get_algorithm(name)
    except PluginLoadError as exc:
        if dist:
            try:
                return registry.get_algorithm(name, dist=dist)
            except CorralError:
                pass
        raise CheckpointError(f"cannot load the checkpoint's algorithm {name!r} (written by {dist!r}): {exc}") from None
    except UnknownPluginError:
        pass
    where = f"{name!r} from distribution {dist!r} {meta.get('distribution_version') or ''}".rstrip()
    if trust_code and path:
        check_outside(path, ckpt.folder, f"algorithm_class={path!r}")
        try:
            cls = import_object(path)
        except ConfigError as exc:
            raise CheckpointError(f"the checkpoint holds algorithm {where}, which is not installed: {exc}") from None
        if is_subclass_of_loaded(cls, "corral.core.training.algorithm", "Algorithm"):
            return cast("type[Algorithm]", cls)
        raise CheckpointError(f"the checkpoint's algorithm_class {path!r} is not a corral Algorithm")
    advice = f"; it names the class {path!r}: if you trust the checkpoint, load it with trust_code=True" if path else ""
    raise CheckpointError(f"the checkpoint holds algorithm {where}, which is not installed; `corral list` shows what is{advice}")

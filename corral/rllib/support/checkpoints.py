"""RLlib's checkpoint utilities (``ray.rllib.utils.checkpoints``) on corral's checkpoints."""

from __future__ import annotations

import os

from corral.core.persistence.checkpoints import MODULES_PATH, CheckpointPath, copy_without_pickles

COMPONENT_LEARNER_GROUP, COMPONENT_LEARNER, COMPONENT_RL_MODULE = MODULES_PATH
"""RLlib's names of an algorithm's parts (``ray.rllib.core``), as ``restore_from_path(component=...)`` and
``RLModule.from_checkpoint`` take them: corral restores the whole algorithm, or its models alone"""


def convert_to_msgpack_checkpoint(checkpoint: CheckpointPath, msgpack_checkpoint_dir: str | os.PathLike[str]) -> str:
    """RLlib's conversion of a checkpoint into one that holds no pickle and reads on any Python version.

    corral's checkpoints are that already, but for one part: what the saving
    script defined itself (a lambda ``policy_mapping_fn``, an env class of
    ``__main__``) is kept pickled in ``config.json``, unpickled only with
    ``trust_code=True``. The copy leaves those pickles out and keeps their
    names, so loading it asks for such an object to be passed again, as
    RLlib's msgpack checkpoints do.

    Args:
        checkpoint: the checkpoint folder (or Ray's ``Checkpoint``).
        msgpack_checkpoint_dir: the copy's folder: new, empty, or a checkpoint (replaced).

    Returns:
        The copy's path.

    Raises:
        CheckpointError: ``checkpoint`` is no valid checkpoint, or the folder holds other files.
    """
    return str(copy_without_pickles(checkpoint, msgpack_checkpoint_dir))

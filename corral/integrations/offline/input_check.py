"""Rows read from an input file, checked against the policy that learns from them before it does.

Before training starts every file's first rows are checked, and every block
again as it is read: a missing column, or a column whose shape, type or values
do not fit the policy's observation or action space, is a
:class:`~corral.errors.ConfigError` naming the file and the column. Columns
come out under corral's names and in the policy's dtypes
(:mod:`~corral.integrations.offline.input_columns`), actions in the policy's space.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.common.sample_batch import (
    DEFAULT_POLICY_ID,
    STATE_IN_PREFIX,
    SampleBatch,
    state_columns,
    state_in_key,
    state_out_key,
)
from corral.core.common.spaces import add_batch_dim
from corral.errors import ConfigError
from corral.integrations.offline.input_columns import Columns, standard_names, typed_columns


class InputCheck:
    """What a policy needs of its input rows, and whether a file's rows have it.

    Args:
        policy: the policy that learns from the rows (its preprocessed observations'
            shape and dtype, and its action space).
        required: the columns the algorithm reads.
        actions_normalized: whether Box actions in the files are already in [-1, 1].
        computed: the required columns that postprocessing would compute (``postprocess_inputs``
            is off): a file without one is told to turn it on.
    """

    def __init__(self, policy: Any, required: Sequence[str], actions_normalized: bool, computed: Sequence[str] = ()) -> None:
        space = self.observation_space = policy.observation_space
        sample = np.asarray(policy.preprocess(add_batch_dim(space, space.sample())))
        self.obs_shape, self.obs_dtype = tuple(sample.shape[1:]), sample.dtype
        self.adapter = policy.action_adapter
        self.action_space = self.adapter.space
        self.policy_space = self.adapter.policy_space
        self.required = tuple(required)
        self.computed = tuple(computed)
        self.normalize = self.adapter.normalize and not actions_normalized
        self.state_shapes = [tuple(part.shape) for part in policy.get_initial_state()]
        """a recurrent model's state parts' shapes, which a file's ``state_in_k`` must have (``[]`` without memory)"""

    def check(self, path: Path, policy_id: str, batch: Columns) -> Columns:
        """``batch`` checked and with actions in the policy's space; a problem names the file and the column.

        Args:
            path: the file the rows are from.
            policy_id: the policy they are for.
            batch: the rows, by column.

        Returns:
            The rows under corral's column names and in the policy's dtypes
            (:mod:`~corral.integrations.offline.input_columns`), actions as the policy
            takes them (integers, or float32 rows in its space).

        Raises:
            ConfigError: a required column is missing, or a column's shape, type or values do not fit.
        """

        def refuse(column: str, problem: str) -> ConfigError:
            where = "" if policy_id == DEFAULT_POLICY_ID else f" (policy {policy_id!r})"
            return ConfigError(f"input file {str(path)!r}{where} column {column!r}: {problem}")

        batch = standard_names(batch)
        missing = [c for c in self.required if c not in batch]
        if missing:
            problem = f"missing; the file has {sorted(batch)}, the algorithm reads {list(self.required)}"
            if missing[0] in self.computed:
                problem += "; postprocessing computes it from the file's episodes: set offline_data(postprocess_inputs=True)"
            if missing[0] == SampleBatch.EPS_ID and self.state_shapes:
                problem += "; a recurrent model (model.use_lstm, use_attention) learns each episode's steps in order"
            raise refuse(missing[0], problem)
        self._check_state(batch, refuse)
        for column in (SampleBatch.OBS, SampleBatch.NEXT_OBS):
            if column not in batch:
                continue
            if tuple(batch[column].shape[1:]) != self.obs_shape:
                raise refuse(
                    column,
                    f"rows of shape {tuple(batch[column].shape[1:])}, but the policy's observations of "
                    f"{self.observation_space} are {self.obs_shape} once preprocessed",
                )
            if batch[column].dtype.kind not in "fiub":
                raise refuse(column, f"{batch[column].dtype} rows; observations are numbers")
            if batch[column].dtype.kind == "f" and not np.all(np.isfinite(batch[column])):
                raise refuse(column, "holds NaN or infinite values")
        out = typed_columns(batch, self.obs_dtype, refuse)
        out[SampleBatch.ACTIONS] = self._actions(batch[SampleBatch.ACTIONS], refuse)
        if SampleBatch.REWARDS in out and not np.all(np.isfinite(out[SampleBatch.REWARDS])):
            raise refuse(SampleBatch.REWARDS, "holds NaN or infinite values")
        return out

    def _check_state(self, batch: Columns, refuse: Callable[[str, str], ConfigError]) -> None:
        """Refuse recorded state that is not this model's: another number of parts, or parts of another shape."""
        if not self.state_shapes:
            return
        recorded = state_columns(batch, STATE_IN_PREFIX)  # as many as the model's at least: each is a required column
        if len(recorded) > len(self.state_shapes):
            raise refuse(
                recorded[-1],
                f"the file holds {len(recorded)} state parts, but the policy's model keeps {len(self.state_shapes)}; "
                "the data was recorded with another model: learn with the model config that recorded it",
            )
        for k, shape in enumerate(self.state_shapes):
            for column in (state_in_key(k), state_out_key(k)):
                if column in batch and tuple(batch[column].shape[1:]) != shape:
                    raise refuse(
                        column,
                        f"rows of shape {tuple(batch[column].shape[1:])}, but the policy's model keeps a state part of "
                        f"shape {shape}; the data was recorded with another model: learn with the model config that "
                        "recorded it",
                    )

    def _actions(self, actions: np.ndarray, refuse: Callable[[str, str], ConfigError]) -> np.ndarray:
        space, name = self.action_space, SampleBatch.ACTIONS
        if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            expected = () if isinstance(space, gym.spaces.Discrete) else tuple(space.nvec.shape)
            if tuple(actions.shape[1:]) != expected or actions.dtype.kind not in "iub":
                found = f"{actions.dtype} rows of shape {actions.shape[1:]}"
                raise refuse(name, f"{found}, but the env's {space} takes integers of shape {expected}")
            start = int(space.start) if isinstance(space, gym.spaces.Discrete) else 0
            high = int(space.n) if isinstance(space, gym.spaces.Discrete) else space.nvec
            if actions.size and (np.any(actions < 0) or np.any(actions >= high)):
                stored = f" (actions are stored without the space's start, {start})" if start else ""
                raise refuse(name, f"holds an action outside [0, n){stored}; the env's space is {space}")
            return actions.astype(np.int64)
        size = int(np.prod(self.policy_space.shape))
        flat = actions.reshape(len(actions), -1) if actions.ndim > 1 else actions.reshape(len(actions), 1)
        if flat.shape[1] != size or actions.dtype.kind not in "fiu":
            found = f"{actions.dtype} rows of shape {actions.shape[1:]}"
            raise refuse(name, f"{found}, but the env's {space} takes {size} numbers per action")
        flat = flat.astype(np.float32)
        if not np.all(np.isfinite(flat)):
            raise refuse(name, "holds NaN or infinite values")
        if self.normalize:  # the policy acts in [-1, 1]; the file holds the env's units
            low, high = (b.reshape(-1).astype(np.float64) for b in (space.low, space.high))
            flat = np.clip(2.0 * (flat - low) / (high - low) - 1.0, -1.0, 1.0).astype(np.float32)
        return flat

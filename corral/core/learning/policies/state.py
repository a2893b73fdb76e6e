"""A policy's state: its weights, what a remote copy needs to act alike, its generators, and what resumes it.

Everything it saves is tensors, numpy arrays or JSON data; everything it
restores is checked first (finite weights, optimizer state that fits the
parameters), since a checkpoint may be damaged or tampered with.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn

from corral.core.common.restored import restored_count
from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.core.learning.policies.optimizer_set import Optimizer
from corral.core.learning.policies.part import PolicyPart
from corral.core.seeding import generator_state, set_generator_state, set_torch_generator_state

if TYPE_CHECKING:  # the class this part makes up with the others
    from corral.core.learning.policy import Policy


class PolicyState(PolicyPart):
    """A policy's weights and state, saved and restored; part of :class:`~corral.core.learning.policy.Policy`."""

    def get_weights(self) -> dict[str, np.ndarray]:
        """The model's parameters and buffers as numpy arrays (copies)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load parameters from :meth:`get_weights` output (numpy arrays or tensors)."""
        # np.array copies: arrays from Ray's object store are read-only, which torch refuses to wrap.
        self.model.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in weights.items()})

    def get_sampling_state(self, weights: dict[str, Any] | None = None) -> dict[str, Any]:
        """What a remote copy of this policy needs to act as it does: weights, timestep, observation filter.

        The timestep drives exploration schedules (epsilon); an exploration's
        own process (Ornstein-Uhlenbeck noise) stays each copy's own.

        Args:
            weights: the weights to send instead of the model's own (a learner thread's
                copy, taken between two updates); None: :meth:`get_weights`.
        """
        state = {"weights": self.get_weights() if weights is None else weights, "global_timestep": int(self.global_timestep)}
        if self.observation_filter is not None:
            state["observation_filter"] = self.observation_filter.get_state()
        return state

    def set_sampling_state(self, state: dict[str, Any]) -> None:
        """Act like the policy :meth:`get_sampling_state` was read from."""
        self.set_weights(state["weights"])
        self.global_timestep = state["global_timestep"]
        if self.observation_filter is not None and "observation_filter" in state:
            self.observation_filter.set_state(state["observation_filter"])

    def get_rng_state(self) -> dict[str, Any]:
        """The state of this copy's generators and exploration: what makes its next actions the same."""
        return {
            "torch_rng": self.torch_rng.get_state(),
            "torch_rng_device": self.torch_rng.device.type,
            "np_rng": json.dumps(generator_state(self.np_rng)),
            "exploration": self.exploration.get_state(),
        }

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_rng_state`.

        A torch generator saved on another kind of device (a policy trained on a
        GPU, restored on a CPU) cannot be set here; this copy keeps its own.

        Raises:
            ValueError: a generator state does not fit (a tampered file).
        """
        if state.get("torch_rng_device", "cpu") == self.torch_rng.device.type:
            set_torch_generator_state(self.torch_rng, state["torch_rng"])
        set_generator_state(self.np_rng, json.loads(state["np_rng"]))
        self.exploration.set_state(state.get("exploration", {}))

    @classmethod
    def from_checkpoint(
        cls, checkpoint: str | os.PathLike[str], policy_id: str = DEFAULT_POLICY_ID, *, trust_code: bool = False
    ) -> Policy:
        """One policy of an algorithm checkpoint, alone: to act with it, or as a frozen opponent.

        Nothing else of the algorithm is built: no environment, no env runners;
        the checkpoint's env and callbacks are not even resolved. The policy is
        of the class the checkpoint's algorithm uses, whichever class this is
        called on.

        Args:
            checkpoint: an algorithm checkpoint folder (``algo.save()``), or, as RLlib's scripts
                name one policy, its ``policies/<policy_id>`` folder inside one (which then names the policy),
                or a policy's own (:meth:`export_checkpoint`).
            policy_id: the policy to load (a policy's own checkpoint names it).
            trust_code: import what the checkpoint names (a custom model by path) even if
                it is not registered; only for checkpoints you trust.

        Returns:
            The policy, with the checkpoint's weights, filter statistics and timestep.

        Raises:
            CheckpointError: the checkpoint is damaged, has no such policy, stores its spaces
                only as descriptions (corral 0.1), or names code that is not registered.
        """
        from corral.core.persistence import checkpoints
        from corral.core.persistence.checkpoint_classes import algorithm_class_of

        path = Path(checkpoint)
        if path.parent.name == "policies" and not (path / checkpoints.META_FILE).exists():
            path, policy_id = path.parent.parent, path.name  # RLlib's <algorithm checkpoint>/policies/<policy_id>
        ckpt = checkpoints.read_checkpoint(path)
        if ckpt.meta.get("policy_checkpoint"):
            policy_id = next(iter(ckpt.meta["policies"]))
        # the algorithm that wrote it knows how its policies are configured; found through the registry
        return algorithm_class_of(ckpt, trust_code).load_policy(ckpt, policy_id, trust_code)

    def export_checkpoint(
        self,
        export_dir: str | os.PathLike[str],
        filename_prefix: Any = None,
        policy_state: dict[str, Any] | None = None,
        checkpoint_format: str = "cloudpickle",
    ) -> str:
        """RLlib's checkpoint of this policy alone, which :meth:`from_checkpoint` reads back.

        A corral checkpoint of one policy: its state, spaces and config. It is
        data only, whichever ``checkpoint_format`` is named (RLlib's
        ``"cloudpickle"`` and ``"msgpack"`` both give it); no algorithm is built from it.

        Args:
            export_dir: the folder: new, empty, or a checkpoint (replaced).
            filename_prefix: RLlib's former name of the state file, which it no longer takes; must be None.
            policy_state: the state to write instead of this policy's own (:meth:`get_state`).
            checkpoint_format: ``"cloudpickle"`` or ``"msgpack"``.

        Returns:
            The folder's path.

        Raises:
            ValueError: another format, a prefix, or a config that belongs to no algorithm.
        """
        from corral._version import __version__
        from corral.core.common.import_paths import object_path
        from corral.core.common.space_codec import encode_space
        from corral.core.persistence import checkpoints

        if checkpoint_format not in ("cloudpickle", "msgpack"):
            raise ValueError(f"checkpoint_format={checkpoint_format!r}: RLlib's formats are 'cloudpickle' and 'msgpack'")
        if filename_prefix is not None:
            raise ValueError("export_checkpoint(filename_prefix=...) is RLlib's former option; leave it out")
        algo_class = type(self.config).algo_class
        if algo_class is None:
            raise ValueError(f"this policy's {type(self.config).__name__} belongs to no algorithm; save its algorithm instead")
        spaces = {"observation_space": encode_space(self.observation_space), "action_space": encode_space(self.action_space)}
        meta = {
            "algorithm": algo_class.name,
            "algorithm_class": object_path(algo_class),
            "corral_version": __version__,
            "policies": {self.policy_id: spaces},
            "policy_checkpoint": True,
        }
        state = self.get_state() if policy_state is None else policy_state
        return str(checkpoints.write_checkpoint(export_dir, meta, self.config.to_dict(), {}, {self.policy_id: state}))

    def export_model(self, export_dir: str | os.PathLike[str], onnx: int | bool | None = None) -> None:
        """RLlib's ``policy.export_model``: this policy's acting as files that run with torch alone (and ONNX).

        The files of ``algo.export_policy_model`` (see :mod:`corral.core.persistence.policy_export`).

        Args:
            export_dir: the folder to write into (created if missing).
            onnx: the ONNX opset to write ``model.onnx`` with too (True: 17); None writes none.

        Raises:
            ConfigError: the opset is not one torch writes, or ``onnx`` is asked without the ``onnx`` package.
        """
        from corral.core.persistence.policy_export import export_policy_model

        export_policy_model(cast("Policy", self), export_dir, self.policy_id, onnx)

    def get_state(self) -> dict[str, Any]:
        """Everything needed to resume: weights, optimizer, exploration, generators, filter, timestep. Tensors only."""
        state: dict[str, Any] = {
            "weights": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            **self.get_rng_state(),
            "global_timestep": int(self.global_timestep),
        }
        if self.observation_filter is not None:
            state["observation_filter"] = self.observation_filter.get_state()
        return state

    def set_weights_from_state(self, state: dict[str, Any]) -> None:
        """Load only the model weights of what :meth:`get_state` returned (RLlib's restore of an RLModule alone).

        Raises:
            ValueError: the weights are not finite tensors; RuntimeError: they do not fit the model.
        """
        load_finite_weights(self.model, state["weights"])

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned.

        Raises:
            ValueError: the weights are not finite, or the optimizer's state does
                not fit the parameters (a tampered or mismatched checkpoint).
        """
        load_finite_weights(self.model, state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])
        check_optimizer_state(self.optimizer)
        if "torch_rng" in state:  # checkpoints of corral 0.1 have none: the generators stay as they are
            self.set_rng_state(state)
        else:
            self.exploration.set_state(state.get("exploration", {}))
        self.global_timestep = restored_count(state.get("global_timestep", 0), "global_timestep")
        if self.observation_filter is not None and "observation_filter" in state:
            self.observation_filter.set_state(state["observation_filter"])


def load_finite_weights(module: nn.Module, weights: Any) -> None:
    """``module.load_state_dict(weights)`` after checking every value is a finite tensor.

    Args:
        module: the network to load into.
        weights: a state dict read from a checkpoint; checked before ``module`` is touched.

    Raises:
        ValueError: ``weights`` is not a dict of tensors, or holds NaN or inf.
    """
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise ValueError("weights must be a dict of tensors")
    bad = [k for k, v in weights.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise ValueError(f"weights {bad} hold NaN or inf")
    module.load_state_dict(weights)


def check_optimizer_state(optimizer: Optimizer) -> None:
    """Check a loaded optimizer state: every per-parameter tensor has its parameter's shape and is finite.

    ``Optimizer.load_state_dict`` checks only the number of parameters; a
    moment of the wrong shape would fail only at the next step, mid-training.

    Raises:
        ValueError: a state tensor has the wrong shape or holds NaN or inf.
    """
    for group in optimizer.param_groups:
        for param in group["params"]:
            for key, value in optimizer.state.get(param, {}).items():
                if not isinstance(value, torch.Tensor):
                    continue
                if value.dim() > 0 and value.shape != param.shape:
                    raise ValueError(
                        f"optimizer state {key!r} has shape {tuple(value.shape)}, its parameter {tuple(param.shape)}"
                    )
                if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                    raise ValueError(f"optimizer state {key!r} holds NaN or inf")

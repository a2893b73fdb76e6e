"""``torch.compile`` of a model's forward passes, as RLlib's ``torch_compile_learner`` and ``torch_compile_worker`` ask.

``framework(torch_compile_learner=True)`` compiles each policy copy's
``forward_train`` (what the losses call), ``torch_compile_worker=True`` its
``forward_exploration`` and ``forward_inference`` (what acting calls), each
with its dynamo backend and mode. torch compiles on a function's first call,
so a copy compiles only what it runs (a remote runner never compiles
``forward_train``), and again for a new batch shape until it marks the shape
dynamic.

The compiled function is kept on the model in place of the method, bound to
that model: a copy of the model (a target network) gets a compiled function
of its own, never the original's.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from corral.core.contracts.config import AlgorithmConfig
from corral.errors import ConfigError

LEARNER_CALLS = ("forward_train",)
"""the model methods ``torch_compile_learner`` compiles"""
WORKER_CALLS = ("forward_exploration", "forward_inference")
"""the model methods ``torch_compile_worker`` compiles"""


class CompiledCall:
    """A model method through ``torch.compile``, kept on the model in the method's place.

    Args:
        module: the model.
        name: the method's name.
        options: ``torch.compile``'s ``backend`` and ``mode``.
    """

    def __init__(self, module: nn.Module, name: str, options: dict[str, Any]) -> None:
        import torch

        self.module, self.name, self.options = module, name, options
        self.compiled: Any = torch.compile(getattr(type(module), name).__get__(module), **options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the compiled method."""
        return self.compiled(*args, **kwargs)

    def __deepcopy__(self, memo: dict[int, Any]) -> CompiledCall:
        # the copy of the model is made first (deepcopy memoises it before copying its attributes): bind to it
        return CompiledCall(memo.get(id(self.module), self.module), self.name, self.options)


def compile_model_calls(model: nn.Module, config: AlgorithmConfig) -> None:
    """Compile the model's forward passes that ``torch_compile_learner`` and ``torch_compile_worker`` ask for.

    Args:
        model: the policy's model.
        config: the policy's config.

    Raises:
        ConfigError: a backend torch does not have.
    """
    for enabled, calls, backend, mode in (
        (
            config.torch_compile_learner,
            LEARNER_CALLS,
            config.torch_compile_learner_dynamo_backend,
            config.torch_compile_learner_dynamo_mode,
        ),
        (
            config.torch_compile_worker,
            WORKER_CALLS,
            config.torch_compile_worker_dynamo_backend,
            config.torch_compile_worker_dynamo_mode,
        ),
    ):
        if not enabled:
            continue
        check_backend(backend)
        for name in calls:
            if callable(getattr(type(model), name, None)):
                model.__dict__[name] = CompiledCall(model, name, {"backend": backend, "mode": mode})


def check_backend(backend: str) -> None:
    """Refuse a dynamo backend this torch does not have.

    Args:
        backend: the backend's name.

    Raises:
        ConfigError: torch has no such backend.
    """
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    if backend not in known:
        raise ConfigError(
            f"dynamo backend {backend!r} is not one this torch has: {', '.join(sorted(known))} "
            "(RLlib's default for workers, 'onnxrt', is not in recent torch; corral's default is 'inductor')"
        )

"""The ``gpu`` mark: a test that needs a CUDA device. The one skip the suite allows, and only where torch sees no CUDA.

Where torch sees a CUDA device, a ``gpu`` test runs and must use it: one
that allocated no CUDA memory in this process fails, so the mark cannot hide
a test that would run anywhere. ``tests/test_gpu_mark.py`` holds both rules.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

NO_CUDA = "no CUDA device"
"""the reason of every skip the mark makes, and of no other"""


def _cuda_allocations() -> int:
    """How many CUDA allocations this process has made (0 before CUDA is initialised; this never initialises it)."""
    import torch

    return int(torch.cuda.memory_stats().get("allocation.all.allocated", 0)) if torch.cuda.is_initialized() else 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``gpu`` tests, with the reason :data:`NO_CUDA`, where torch sees no CUDA device; nothing else."""
    import torch

    if torch.cuda.is_available():
        return
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_CUDA))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail a ``gpu`` test that ran and allocated no CUDA memory here: it did not need the mark."""
    if item.get_closest_marker("gpu") is None:
        return (yield)
    before = _cuda_allocations()
    result = yield
    if _cuda_allocations() == before:
        pytest.fail("this gpu-marked test allocated no CUDA memory: the gpu mark is only for tests that use the GPU")
    return result

"""The ``gpu`` mark skips only ``gpu`` tests, only where torch sees no CUDA device, and only for that reason.

The suite's own hooks (``tests/gpu_mark.py``) run in a pytest subprocess on a
small test file: once with CUDA hidden, once with torch told it has a device
(where there is none, a ``gpu`` test then runs and fails, as it must).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.gpu_mark import NO_CUDA

pytest_plugins = ["pytester"]

REPOSITORY = Path(__file__).resolve().parent.parent

TESTS = """
import pytest

@pytest.mark.gpu
def test_needs_cuda():
    pass

@pytest.mark.gpu
class TestOnCuda:
    def test_in_a_class(self):
        pass

def test_plain():
    pass

@pytest.mark.slow
def test_slow():
    pass
"""


def run_with_the_gpu_mark(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cuda: bool) -> pytest.RunResult:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # torch sees no CUDA device, whatever the machine has
    pretend = "import torch\ntorch.cuda.is_available = lambda: True\n" if cuda else ""
    pytester.makeconftest(f"{pretend}from tests.gpu_mark import pytest_collection_modifyitems, pytest_runtest_call\n")
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs CUDA\n    slow: slow\n")
    pytester.makepyfile(TESTS)
    return pytester.runpytest_subprocess("-v", "-rs", "-p", "no:cacheprovider")


def test_without_cuda_the_mark_skips_its_tests_for_that_reason_and_nothing_else(pytester, monkeypatch) -> None:
    result = run_with_the_gpu_mark(pytester, monkeypatch, cuda=False)
    result.assert_outcomes(passed=2, skipped=2)
    outcomes = {line.split(" ")[0].split("::", 1)[1]: line.split(" ")[1] for line in result.outlines if "::" in line}
    assert outcomes == {
        "test_needs_cuda": "SKIPPED",
        "TestOnCuda::test_in_a_class": "SKIPPED",
        "test_plain": "PASSED",
        "test_slow": "PASSED",
    }
    reasons = [line for line in result.outlines if line.startswith("SKIPPED [")]
    assert len(reasons) == 2 and all(line.endswith(f": {NO_CUDA}") for line in reasons), result.outlines


def test_with_cuda_the_mark_skips_nothing_and_a_test_that_uses_no_cuda_fails(pytester, monkeypatch) -> None:
    result = run_with_the_gpu_mark(pytester, monkeypatch, cuda=True)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*allocated no CUDA memory: the gpu mark is only for tests that use the GPU*"])

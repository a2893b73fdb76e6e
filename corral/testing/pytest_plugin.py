"""The pytest plugin corral registers (entry point ``pytest11``): the ``corral_conformance`` fixture.

Loaded by every pytest run in an environment where corral is installed, so it
imports nothing heavy until a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def corral_conformance(tmp_path: Path) -> Callable[..., None]:
    """``check_algorithm`` with its scratch folder set to this test's ``tmp_path``.

    Call it as ``corral_conformance("NAME", {config overrides}, env=...)``; it
    raises ``ConformanceError`` listing every failed check.
    """
    from corral.testing import check_algorithm

    def check(name: str, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        check_algorithm(name, config, workdir=tmp_path, **kwargs)

    return check

"""Keep result folders out of the home directory."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def results_dir(tmp_path, monkeypatch):
    """Point ``CORRAL_RESULTS_DIR`` at this test's tmp folder."""
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path / "corral_results"))

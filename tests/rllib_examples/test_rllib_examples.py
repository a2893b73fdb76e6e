"""RLlib's example scripts (Ray 2.9.0's wheel, ``ray.rllib`` rewritten to ``corral.rllib``) run to exit 0 on corral.

CI runs the scripts :data:`~tests.rllib_examples.harness.SCRIPTS` marks ``ci``;
``python -m tests.rllib_examples.harness`` runs the whole list (CONTRIBUTING.md).
Each starts its own Ray, so they run one after another with the other Ray tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rllib_examples import harness

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="session")
def rllib_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RLlib's examples folder, rewritten (downloaded once per test session)."""
    return harness.fetch_examples(tmp_path_factory.mktemp("rllib_wheel"))


def test_the_list_names_every_script_of_rllib_s_examples_folder_once(rllib_examples: Path) -> None:
    listed = [script.path for script in harness.SCRIPTS] + list(harness.CANNOT_RUN)
    scripts = sorted(p.name for p in (rllib_examples / "examples").glob("*.py") if p.name != "__init__.py")
    assert sorted(listed) == scripts
    text = (rllib_examples / "examples" / "custom_env.py").read_text()
    assert "corral.rllib" in text and "ray.rllib" not in text  # the only change: the prefix


@pytest.mark.parametrize("script", [s for s in harness.SCRIPTS if s.ci], ids=lambda s: s.path)
def test_an_rllib_example_script_runs_to_exit_0_with_no_errored_trial(
    script: harness.Script, rllib_examples: Path, tmp_path: Path
) -> None:
    proc = harness.run_script(rllib_examples, script, tmp_path)
    assert harness.failure(proc) is None, proc.stderr[-6000:]
    assert "TERMINATED" in proc.stdout or "reached" in proc.stdout  # Tune finished its trials

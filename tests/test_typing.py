"""The public face is typed: a type checker sees what ``corral.get_config("PPO").build()`` returns.

The face resolves its names lazily at run time; ``if TYPE_CHECKING:`` imports
and ``py.typed`` tell a type checker what they are. This runs mypy on a small
user script, as a user's editor or CI would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import corral

SNIPPET = """\
import corral
from corral.core import SampleBatch

reveal_type(corral.get_algorithm("PPO"))
reveal_type(corral.get_config("PPO"))
reveal_type(corral.get_config("PPO").build())
reveal_type(corral.get_config("PPO").build().train())
reveal_type(SampleBatch.OBS)
reveal_type(corral.Callbacks().on_episode_end)
reveal_type(corral.Callbacks().on_train_result)


def on_result(algo: corral.Algorithm) -> None:
    algo.train(1)
"""


def test_mypy_sees_the_types_behind_the_lazy_face(tmp_path: Path) -> None:
    script = tmp_path / "user_script.py"
    script.write_text(SNIPPET)
    # what is checked is corral's own face: the big third-party packages are skipped (as Any), which
    # takes mypy from a minute and a half to a fifth of that (torch's stubs alone are most of it)
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\n[mypy-torch.*,numpy.*,gymnasium.*,pydantic.*,pydantic_core.*,ray.*,pandas.*,pyarrow.*]\nfollow_imports = skip\n"
    )
    source_root = Path(corral.__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--check-untyped-defs", script.name],
        cwd=tmp_path,
        env={"MYPYPATH": str(source_root), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    revealed = [line.split("Revealed type is ")[1].strip('"') for line in proc.stdout.splitlines() if "Revealed type" in line]
    assert revealed == [
        "type[corral.core.training.algorithm.Algorithm]",
        "corral.core.contracts.config.AlgorithmConfig",
        "corral.core.training.algorithm.Algorithm",
        "dict[str, Any]",
        "str",
        "def (*, episode: corral.core.sampling.env_runner.Episode | "
        "corral.core.sampling.multi_agent_env_runner.MultiAgentEpisode, "
        "env_runner: corral.core.sampling.env_runner.EnvRunner | "
        "corral.core.sampling.multi_agent_env_runner.MultiAgentEnvRunner | "
        "corral.core.sampling.external.external_env_runner.ExternalEnvRunner, "
        "env_index: int, **kwargs: Any)",
        "def (*, algorithm: corral.core.training.algorithm.Algorithm, result: dict[str, Any], **kwargs: Any)",
    ], proc.stdout + proc.stderr
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert errors == [f'{script.name}:14: error: Too many arguments for "train" of "Algorithm"  [call-arg]'], proc.stdout


def test_the_package_says_it_is_typed() -> None:
    assert (Path(corral.__file__).parent / "py.typed").is_file()


def test_the_type_checkers_view_of_each_lazy_face_is_its_run_time_exports() -> None:
    """The names under ``if TYPE_CHECKING:`` come from the very modules ``_EXPORTS`` resolves them from."""
    import ast
    import importlib

    for name in ("corral", "corral.core"):
        module = importlib.import_module(name)
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING")
        typed = {
            alias.asname or alias.name: node.module
            for node in block.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        assert typed == module._EXPORTS, f"{name}: the TYPE_CHECKING imports and _EXPORTS differ"

"""The package's layers, read from the source: each imports only what lies below it.

From the bottom: ``corral.errors``, ``corral.plugin_api``, ``corral._version`` and
``corral._lazy`` (nothing from corral); ``corral.registry`` (those alone); ``corral.core`` (the
registry and those, never the plugins); then the plugins and the public face.
Only what runs counts: imports under ``if TYPE_CHECKING:`` name types for the
type checker (``get_algorithm`` returns ``type[Algorithm]``) and may look upward.
No module of the core or the registry imports names from the face
(``from corral import X``), which re-exports what lies below it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import corral

PACKAGE = Path(corral.__file__).parent
BASE = ("corral.errors", "corral.plugin_api", "corral._version", "corral._lazy")


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports at run time, at any depth of its code (lazy imports inside functions too).

    Imports under ``if TYPE_CHECKING:`` are left out: they name types for the
    type checker and are never executed.
    """
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        if isinstance(node, ast.If) and is_type_checking_block(node):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


def modules_under(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def below(module: str, *allowed: str) -> bool:
    return not module.startswith("corral") or any(module == a or module.startswith(a + ".") for a in allowed)


@pytest.mark.parametrize("module", BASE)
def test_the_base_imports_nothing_from_corral(module: str) -> None:
    path = PACKAGE / f"{module.removeprefix('corral.')}.py"
    assert {m for m in imported_modules(path) if m.startswith("corral")} == set()


def test_the_registry_depends_on_nothing_above_it() -> None:
    for path in modules_under("registry"):
        wrong = {m for m in imported_modules(path) if not below(m, "corral.registry", *BASE)}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}"


def test_the_core_imports_neither_the_plugins_nor_the_public_face() -> None:
    for path in modules_under("core"):
        wrong = {m for m in imported_modules(path) if not below(m, "corral.core", "corral.registry", *BASE)}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}"


ROOMS = ("common", "contracts", "environments", "persistence", "networks", "learning", "sampling", "training")
"""The core's rooms from the bottom up: each imports only itself and the rooms before it (CONTRIBUTING says why)."""
BESIDE_THE_ROOMS = ("seeding", "results", "memory", "threads", "devices")
"""modules that serve every room and import none"""


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_imports_only_the_rooms_below_it(room: str) -> None:
    """Every import that runs counts, at module level or inside a function: no exception list."""
    below_it = [f"corral.core.{r}" for r in ROOMS[: ROOMS.index(room) + 1]]
    beside = [f"corral.core.{m}" for m in BESIDE_THE_ROOMS]
    for path in modules_under(f"core/{room}"):
        wrong = {m for m in imported_modules(path) if not below(m, *below_it, *beside, "corral.registry", *BASE)}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}, which lie above the {room} room"


def test_the_integrations_build_on_the_core_and_nothing_above_it() -> None:
    """Integrations import the core and the registry; neither imports them (the core's test above holds that)."""
    for path in modules_under("integrations"):
        allowed = ("corral.integrations", "corral.core", "corral.registry", *BASE)
        wrong = {m for m in imported_modules(path) if not below(m, *allowed)}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}"


def test_the_rooms_cover_the_core() -> None:
    folders = {p.name for p in (PACKAGE / "core").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in (PACKAGE / "core").glob("*.py") if p.name != "__init__.py"}
    assert folders == set(ROOMS)
    assert modules == set(BESIDE_THE_ROOMS)


@pytest.mark.parametrize("module", BESIDE_THE_ROOMS)
def test_the_modules_beside_the_rooms_import_none(module: str) -> None:
    imported = imported_modules(PACKAGE / "core" / f"{module}.py")
    wrong = {m for m in imported if not below(m, *(f"corral.core.{m}" for m in BESIDE_THE_ROOMS), "corral.registry", *BASE)}
    assert not wrong, f"corral/core/{module}.py imports {sorted(wrong)}"


def test_importing_the_registry_imports_no_heavy_library() -> None:
    code = "import sys, corral.registry; print(sorted(m for m in ('torch', 'gymnasium', 'ray') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("folder", ["core", *(f"core/{room}" for room in ROOMS), "registry", "plugins", "integrations"])
def test_no_folder_holds_more_than_a_dozen_modules(folder: str) -> None:
    modules = [p for p in (PACKAGE / folder).glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= 12, f"corral/{folder} holds {len(modules)} modules; split it by concern"


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_of_the_core_says_its_job_and_imports_nothing(room: str) -> None:
    """A room's ``__init__`` is its docstring alone, so importing one module of it loads no other."""
    tree = ast.parse((PACKAGE / "core" / room / "__init__.py").read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"corral/core/{room}/__init__.py needs a docstring saying its one job"
    assert len(tree.body) == 1, f"corral/core/{room}/__init__.py should hold only its docstring"


def test_every_module_that_moved_stays_importable_under_its_old_path() -> None:
    """Checkpoints of corral 0.1 name classes as ``corral.core.<module>:<Class>``; plugins import deep paths."""

    import corral.core

    moved = corral.core._MOVED_MODULES
    modules_of_the_flat_core = [
        "actor_critic",
        "algorithm",
        "async_sampling",
        "callbacks",
        "checkpoints",
        "config",
        "distributions",
        "env_runner",
        "env_runner_group",
        "env_state",
        "envs",
        "errors",
        "exploration",
        "filters",
        "hookspecs",
        "loggers",
        "metrics",
        "models",
        "nonfinite",
        "off_policy",
        "plugin_api",
        "policy",
        "postprocessing",
        "remote_env_runner",
        "replay_buffers",
        "safe_loading",
        "sample_batch",
        "schedules",
        "spaces",
        "state_codec",
        "sum_tree",
        "vtrace_targets",
    ]
    moved_into_common = [
        "environments.spaces",
        "persistence.by_value",
        "persistence.space_codec",
        "persistence.state_codec",
        "sampling.sample_batch",
    ]
    moved_when_layered = [
        "contracts.acting",
        "contracts.algorithm",
        "contracts.exploration",
        "contracts.policy",
        "contracts.random_policy",
        "learning.action_masking",
        "learning.distributions",
        "learning.models",
        "learning.replay_buffers",
        "learning.sum_tree",
        "sampling.filters",
    ]
    moved_out_of_the_core = [
        "environments.pettingzoo_envs",
        "environments.atari",
        "environments.old_gym",
        "environments.rendering",
        *(
            f"persistence.{name}"
            for name in (
                "experience_input",
                "experience_output",
                "experience_reader",
                "input_check",
                "input_columns",
                "input_files",
                "ray_data_input",
            )
        ),
        "estimation",
        *(
            f"estimation.{name}"
            for name in ("estimator", "importance_sampling", "direct_method", "fitted_q", "offline_evaluation")
        ),
    ]
    expected = modules_of_the_flat_core + moved_into_common + moved_when_layered + moved_out_of_the_core
    assert sorted(old.removeprefix("corral.core.") for old in moved) == sorted(expected)
    for old, new in moved.items():
        assert_imports_under_its_old_name(old, new)


@pytest.mark.parametrize("old, new", [("corral.cli_progress", "corral.cli.progress"), ("corral.cli_stop", "corral.cli.stop")])
def test_the_command_line_s_modules_that_moved_into_its_package_still_import(old: str, new: str) -> None:
    assert_imports_under_its_old_name(old, new)


def assert_imports_under_its_old_name(old: str, new: str) -> None:
    import importlib

    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        sys.modules.pop(old, None)
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__.name == new  # its own spec, not the alias's


def test_an_old_path_never_shadows_a_module_that_exists() -> None:
    """The finder of old paths answers before the regular ones, so no old path may be a module that still exists."""
    import importlib

    import corral.core

    for old in corral.core._MOVED_MODULES:
        relative = Path(*old.split(".")[1:])
        assert not (PACKAGE / f"{relative}.py").exists() and not (PACKAGE / relative / "__init__.py").exists(), old
    assert importlib.import_module("corral.core.seeding").__name__ == "corral.core.seeding"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("corral.core.no_such_module")


def test_batch_columns_and_model_outputs_are_named_by_their_constants() -> None:
    """``batch[SampleBatch.VALID]``, never ``batch["valid"]``: a typo in a constant fails loudly, in a string silently."""
    from corral.core import SampleBatch

    columns = {v for k, v in vars(SampleBatch).items() if k.isupper() and isinstance(v, str)}
    # Keys that share a column's name but are not columns: checkpoint state, a wire field.
    state_keys = {
        "core/learning/policies/state.py": {"weights"},
        "core/sampling/runner_state.py": {"obs"},  # both env runners' state (it was in their modules)
        "core/environments/sub_environment_guard.py": {"actions"},
        "core/environments/multi_agent_guard.py": {"actions"},
        "core/learning/replay/replay_buffers.py": {"priorities"},  # a prioritized buffer's checkpoint
        "testing/example_envs/games.py": {"obs"},  # a key of TwoStepGame's observation dict, as RLlib's env has it
        # a multi-agent LOG_RETURNS' agents done (RLlib's multiagent_done_dict), not the batch column
        "integrations/serving/protocol.py": {"dones"},
        "integrations/serving/policy_client.py": {"dones"},
    }
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "sample_batch.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            keys: list[ast.expr | None] = []
            if isinstance(node, ast.Subscript):
                keys = [node.slice]
            elif isinstance(node, ast.Dict):
                keys = list(node.keys)
            elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
                keys = [node.left]
            found += [
                f"{path.relative_to(PACKAGE)}:{key.lineno} {key.value!r}"
                for key in keys
                if isinstance(key, ast.Constant)
                and key.value in columns
                and key.value not in state_keys.get(path.relative_to(PACKAGE).as_posix(), ())
            ]
    assert not found, "use the SampleBatch constants: " + ", ".join(found)

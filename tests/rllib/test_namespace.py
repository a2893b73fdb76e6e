"""``corral.rllib``: RLlib's module paths resolve to corral's objects, and what corral lacks says what to use instead."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import corral
from corral import registry
from corral.rllib import namespace, table, table_docs


def _entries(kind: str) -> list[tuple[str, str, str]]:
    rows = [(path, name, entry) for path, names in table.MODULES.items() for name, entry in names.items()]
    if kind == "missing":
        return [row for row in rows if row[2].startswith("!")]
    return [row for row in rows if not row[2].startswith("!")]


@pytest.mark.parametrize(("path", "name", "entry"), _entries("present"), ids=lambda v: str(v)[:60])
def test_every_name_the_table_maps_imports_from_its_rllib_path_as_the_object_the_table_names(
    path: str, name: str, entry: str
) -> None:
    module = importlib.import_module(f"corral.rllib.{path}" if path else "corral.rllib")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(module, name)
    target = entry.removeprefix("tf=")
    kind, _, ref = target.partition(":")
    expected = {
        "algo": lambda: registry.get_algorithm(ref),
        "config": lambda: registry.get_algorithm(ref).config_class,
        "policy": lambda: registry.get_algorithm(ref).policy_class,
    }.get(kind, lambda: getattr(importlib.import_module(kind), ref))()
    assert value is expected
    tf_notes = [w for w in caught if "corral runs on torch" in str(w.message)]
    assert len(tf_notes) == (1 if entry.startswith("tf=") else 0)
    assert name in module.__all__ and name in dir(module)


@pytest.mark.parametrize(("path", "name", "entry"), _entries("missing"), ids=lambda v: str(v)[:60])
def test_a_name_corral_does_not_have_is_an_import_error_that_says_what_to_use(path: str, name: str, entry: str) -> None:
    module = importlib.import_module(f"corral.rllib.{path}" if path else "corral.rllib")
    with pytest.raises(ImportError) as raised:
        exec(f"from {module.__name__} import {name}", {})
    assert entry[1:] in str(raised.value) and f"{name} is not in corral" in str(raised.value)
    assert name not in module.__all__


def test_an_unlisted_name_or_path_is_an_import_error_naming_the_table() -> None:
    with pytest.raises(ImportError, match=r"maps no RLlib name 'NoSuchThing'.*docs/rllib.md"):
        from corral.rllib.policy.sample_batch import NoSuchThing  # type: ignore[attr-defined]  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match=r"maps no RLlib module ray\.rllib\.no_such_folder"):
        importlib.import_module("corral.rllib.no_such_folder.module")


def test_a_module_corral_does_not_have_says_why_below_any_depth() -> None:
    with pytest.raises(ModuleNotFoundError, match=r"alpha_zero.*not in corral: corral has no such algorithm"):
        importlib.import_module("corral.rllib.algorithms.alpha_zero.alpha_zero")
    with pytest.raises(ModuleNotFoundError, match=r"corral runs on torch only"):
        importlib.import_module("corral.rllib.models.tf.visionnet")


def test_corral_s_own_modules_beside_the_namespace_import_as_modules_do() -> None:
    code = "from corral.rllib import support, table\nfrom corral.rllib.support import framework\nprint(framework.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "corral.rllib.support.framework"


def test_folders_import_as_packages_and_submodules_as_their_attributes() -> None:
    import corral.rllib.models.torch.misc as misc
    from corral.rllib.algorithms import ppo
    from corral.rllib.algorithms.ppo.ppo import PPO, PPOConfig

    assert ppo.PPOConfig is PPOConfig and PPOConfig().build is not None
    assert PPOConfig.algo_class is PPO is corral.get_algorithm("PPO")
    assert importlib.import_module("corral.rllib.models.torch").misc is misc
    assert "algorithms" in dir(importlib.import_module("corral.rllib"))
    assert {"ppo", "dqn", "Algorithm"} <= set(dir(importlib.import_module("corral.rllib.algorithms")))


def test_an_algorithm_a_plugin_registers_is_found_under_its_rllib_folder_whatever_provides_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Mine(corral.get_algorithm("PPO")):  # type: ignore[misc,valid-type]
        """A stand-in for another plugin's PPO."""

    algorithms = registry.registry_for(registry.ALGORITHMS_GROUP)
    # the registration is undone afterwards: registering PPO back would leave it registered in-process, not installed
    monkeypatch.setattr(algorithms, "_in_process", dict(algorithms._in_process))
    registry.register_algorithm("PPO", Mine)
    assert namespace.resolve("algorithms.ppo", "PPO") is Mine


def test_a_tensorflow_name_gives_the_torch_class_with_one_warning_per_process() -> None:
    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    from corral.rllib.models.tf.tf_modelv2 import TFModelV2\n"
        "    from corral.rllib.models.tf.tf_modelv2 import TFModelV2 as again\n"
        "from corral.rllib.models.torch.torch_modelv2 import TorchModelV2\n"
        "print(TFModelV2 is again is TorchModelV2, [str(w.message) for w in caught])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == (
        'True ["corral runs on torch: TFModelV2 is corral\'s torch counterpart, corral.core.networks.model_v2.TorchModelV2"]'
    )


def test_tf_utils_imports_and_its_session_helper_says_on_use_that_corral_runs_on_torch() -> None:
    from corral.rllib.utils import torch_utils

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TF name's one warning per process (tested above)
        from corral.rllib.utils.tf_utils import explained_variance, make_tf_callable
    assert explained_variance is torch_utils.explained_variance
    with pytest.raises(ImportError, match=r"make_tf_callable .*TensorFlow session.*corral runs on torch"):
        make_tf_callable(None)(len)


def test_importing_the_namespace_registers_every_algorithm_with_tune_as_importing_rllib_does() -> None:
    code = (
        "import corral.rllib\n"
        "from ray.tune.registry import get_trainable_cls\n"
        "print(type(get_trainable_cls('DQN').get_default_config()).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "DQNConfig"


def test_the_table_s_document_lists_every_path_and_the_missing_modules() -> None:
    text = table_docs.render()
    assert "| `ray.rllib.algorithms.ppo` | `PPO` |" in text
    assert "`ray.rllib.utils.framework.try_import_torch`" in text
    assert "| `ray.rllib.algorithms.alpha_zero` |" in text
    paths = [p for p in table.MODULES if p and not p.startswith("algorithms.")]
    assert all(f"`ray.rllib.{p}." in text for p in paths)

"""Loaded by every Python process of an RLlib example run (the script, and Ray's workers through PYTHONPATH).

RLlib's example scripts import RLlib's other example modules (``examples.models.rnn_model``)
under ``corral.rllib.examples``; the harness extracted those modules (rewritten to
``corral.rllib``) into ``CORRAL_RLLIB_EXAMPLES_ROOT``. This finder serves them, except
the paths corral's own table maps (its example envs), which corral serves.
"""

import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

_PREFIX = "corral.rllib.examples"


class _ExampleModules(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _PREFIX and not fullname.startswith(_PREFIX + "."):
            return None
        from corral.rllib import table

        relative = fullname.removeprefix("corral.rllib.")
        if relative in table.PACKAGES:
            return None  # corral's own (its example envs, RandomPolicy)
        base = self.root.joinpath(*relative.split("."))
        if (base / "__init__.py").exists():
            return importlib.util.spec_from_file_location(fullname, base / "__init__.py", submodule_search_locations=[str(base)])
        if base.with_suffix(".py").exists():
            return importlib.util.spec_from_file_location(fullname, base.with_suffix(".py"))
        return None


_root = os.environ.get("CORRAL_RLLIB_EXAMPLES_ROOT")
if _root:
    sys.meta_path.insert(0, _ExampleModules(Path(_root)))

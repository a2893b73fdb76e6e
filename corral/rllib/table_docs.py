"""The migration table rendered as Markdown: ``docs/rllib.md`` (``python -m corral.rllib`` prints it)."""

from __future__ import annotations

from corral.rllib import table


def _shown(entry: str) -> str:
    if entry.startswith("!"):
        return f"not in corral: {entry[1:]}"
    tensorflow = entry.startswith("tf=")
    target = entry.removeprefix("tf=")
    kind, _, value = target.partition(":")
    shown = {
        "algo": f"the algorithm registered as `{value}`",
        "config": f"`{value}`'s config class",
        "policy": f"`{value}`'s policy class",
    }.get(kind, f"`{kind}.{value}`")
    return f"{shown} (torch, with a warning)" if tensorflow else shown


def render() -> str:
    """The table as Markdown: ``docs/rllib.md``, the migration's reference.

    Returns:
        The document.
    """
    lines = [
        "# RLlib's names in corral\n\n",
        "Change `ray.rllib` to `corral.rllib` in a script's imports and nothing else: each name below resolves to ",
        "corral's own object. A name not listed raises an `ImportError` that says so; a name marked *not in corral* ",
        "raises one that says what to use instead. TensorFlow names give corral's torch class, with a one-line ",
        "warning. The table is `corral/rllib/table.py` (the new API stack's paths: `table_new_stack.py`).\n\n",
        "## Algorithms\n\n",
        "Each of RLlib's algorithm folders (`ray.rllib.algorithms.ppo`, with its modules `.ppo`, `.ppo_torch_policy` and ",
        "`.ppo_tf_policy`) gives the algorithm registered under the name shown, whichever installed plugin provides it: ",
        "the algorithm class, its config class, and its policy class under the torch and TensorFlow policy names.\n\n",
        "| RLlib's folder | registered as | names |\n|---|---|---|\n",
    ]
    for folder, (registered, stem, tf_policies) in sorted(table.ALGORITHMS.items()):
        names = ", ".join(f"`{n}`" for n in (stem, f"{stem}Config", f"{stem}TorchPolicy", *tf_policies))
        lines.append(f"| `ray.rllib.algorithms.{folder}` | `{registered}` | {names} |\n")
    lines.append("\n## Everything else\n\n| RLlib | corral |\n|---|---|\n")
    algorithm_modules = set(table.algorithm_modules())
    for path in sorted(set(table.MODULES) - algorithm_modules):
        module = f"ray.rllib.{path}" if path else "ray.rllib"
        lines += [f"| `{module}.{name}` | {_shown(entry)} |\n" for name, entry in sorted(table.MODULES[path].items())]
    lines.append("\n## Modules corral does not have\n\n| RLlib | why, and what to use |\n|---|---|\n")
    lines += [f"| `ray.rllib.{path}` | {reason} |\n" for path, reason in sorted(table.MISSING_MODULES.items())]
    return "".join(lines)

"""How often ``Any`` appears in the public signatures of corral's core: a measure of issue 30 (house-2).

A public signature is a function or method whose name, and its class's and
module's names, do not start with ``_``. Each parameter annotation and return
annotation that mentions ``Any`` counts once (``dict[str, Any]`` for a result
or a state, ``gym.Space[Any]``), and those that are ``Any`` itself, which say
nothing of the type, are counted apart; ``*args``/``**kwargs`` do not count
(passing arguments through is what ``Any`` is for).

    python benchmarks/any_in_signatures.py [folder]    # prints JSON: signatures, those with Any, annotations with Any
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path


def _mentions_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return any(part == "Any" for part in text.replace("[", " ").replace("]", " ").replace(",", " ").replace("|", " ").split())


def _public_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            found.append(node)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += [
                item
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and (not item.name.startswith("_") or item.name == "__init__")
            ]
    return found


def main() -> None:
    """Count, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="corral/core")
    args = parser.parse_args()
    signatures = with_any = annotations = bare = 0
    for path in sorted(Path(args.folder).rglob("*.py")):
        if any(part.startswith("_") and part != "__init__.py" for part in path.parts):
            continue
        for function in _public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            arguments = function.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            hits = sum(_mentions_any(a.annotation) for a in every) + _mentions_any(function.returns)
            shown = [ast.unparse(a) for a in (*(arg.annotation for arg in every), function.returns) if a is not None]
            bare += sum(text in ("Any", "'Any'") for text in shown)
            signatures += 1
            with_any += hits > 0
            annotations += hits
    counts = {"public_signatures": signatures, "with_any": with_any, "annotations_with_any": annotations, "bare_any": bare}
    print(json.dumps(counts))


if __name__ == "__main__":
    main()

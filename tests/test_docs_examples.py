"""The code blocks of README.md and docs/*.md run as printed: a reader who copies one gets what it says.

The rules (CONTRIBUTING.md, "Code blocks in the docs", says them for writers):

- Each ```python block runs as a script of its own in a fresh Python process.
  The blocks of one section (the text under one heading) run in order in one
  working folder, so a block sees what an earlier one of its section wrote: a
  checkpoint saved, then reopened in a new process; a model exported, then
  served. ``HOME`` and ``CORRAL_RESULTS_DIR`` point into the test's tmp folder.
- Each ```bash block runs its ``corral`` commands (lines joined at a trailing
  ``\\``, commands split at ``&&``, ``#`` comments dropped), each of which
  must exit with status 0. By rule, :data:`NOT_RUN_COMMANDS` are not run, for
  the reason beside each; a command no rule covers fails the test, so a new
  kind of command needs a rule here, not silence.
- A fence with another language, or none, is text (a folder tree, output) and
  is not run.
- HTML comments on the lines right above a fence say more about its block:
  ``<!-- not run: REASON -->`` keeps it out (a synopsis, a signature; the
  reason is required); ``<!-- continues the block above -->`` runs it after
  the section's previous python block in the same process (a fragment that
  uses its names); ``<!-- slow: REASON -->`` marks it slow (a run to a reward
  threshold), and the blocks after it in its section with it, since they run
  it first.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# the blocks of a section build on each other: with pytest -n 2 they all run on one worker, in order
pytestmark = pytest.mark.xdist_group("docs")

REPOSITORY = Path(__file__).resolve().parent.parent
DOCUMENTS = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("**/*.md"))]

NOT_RUN_COMMANDS = {
    "pip install": "installs corral: the test runs the checkout it belongs to, already installed",
    "python -m pytest": "runs the test suite, of which this test is part",
}
"""the commands of bash blocks that are not run, by how they start, and why"""

SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<language>[\w+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not run|continues the block above|slow)\s*(?::\s*(?P<reason>.*?))?\s*-->\s*$")


@dataclass
class Block:
    """A fenced code block of a document, with what the comments above it say."""

    document: Path
    line: int
    section: str
    language: str
    code: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``README.md:30``: where the block starts."""
        return f"{self.document.relative_to(REPOSITORY)}:{self.line}"


def blocks_of(document: Path) -> list[Block]:
    """Every fenced block of a markdown document, in order."""
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    section, at = document.stem, 0
    while at < len(lines):
        heading = re.match(r"^#{1,6}\s+(.*)", lines[at])
        if heading:
            section = heading.group(1).strip()
        fence = FENCE.match(lines[at])
        if not fence:
            at += 1
            continue
        end = next(i for i in range(at + 1, len(lines)) if lines[i].strip() == "```")
        markers: dict[str, str] = {}
        above = at - 1
        while above >= 0 and (not lines[above].strip() or MARKER.match(lines[above])):
            marker = MARKER.match(lines[above])
            if marker:
                markers[marker.group("kind")] = marker.group("reason") or ""
            above -= 1
        code = textwrap.dedent("\n".join(lines[at + 1 : end])) + "\n"
        blocks.append(Block(document, at + 1, section, fence.group("language").lower(), code, markers))
        at = end + 1
    return blocks


def commands_of(block: Block) -> list[list[str]]:
    """The commands of a shell block: lines joined at a trailing backslash, split at ``&&``, comments dropped."""
    text = re.sub(r"\\\n", " ", block.code)
    commands = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            commands.append(words[:cut])
            words = words[cut + 1 :]
    return [command for command in commands if command]


def not_run_reason(command: list[str]) -> str | None:
    """Why a shell command is not run (:data:`NOT_RUN_COMMANDS`), or None for a ``corral`` command, which is."""
    text = " ".join(command)
    return next((why for start, why in NOT_RUN_COMMANDS.items() if text.startswith(start)), None)


def runs(block: Block) -> bool:
    """Whether the block is run: python, or a shell block with a corral command, and no ``not run`` marker."""
    if "not run" in block.markers:
        return False
    if block.language == "python":
        return True
    return block.language in SHELL_LANGUAGES and any(not_run_reason(c) is None for c in commands_of(block))


ALL_BLOCKS = [block for document in DOCUMENTS for block in blocks_of(document)]
RUN = [block for block in ALL_BLOCKS if runs(block)]


def earlier_in_section(block: Block) -> list[Block]:
    """The blocks that run before ``block`` in its section, in order."""
    return [b for b in RUN if b.document == block.document and b.section == block.section and b.line < block.line]


def case(block: Block) -> object:
    """The pytest case of a block, marked slow where it (or an earlier block of its section) is."""
    marks: list[pytest.MarkDecorator] = []
    if any("slow" in b.markers for b in [*earlier_in_section(block), block]):
        marks.append(pytest.mark.slow)
    return pytest.param(block, id=block.name, marks=marks)


class Sections:
    """The working folder of each section and the blocks that have run there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: set[str] = set()

    def folder(self, block: Block) -> Path:
        """The working folder of ``block``'s section (created empty the first time)."""
        slug = re.sub(r"[^\w]+", "_", f"{block.document.stem}_{block.section}").strip("_")
        path = self.root / slug
        path.mkdir(exist_ok=True)
        return path

    def run(self, block: Block) -> subprocess.CompletedProcess[str] | None:
        """Run the block in its section's folder (once): its script, or each of its corral commands until one fails."""
        self.done.add(block.name)
        environment = {**os.environ, "HOME": str(self.root / "home"), "CORRAL_RESULTS_DIR": str(self.root / "corral_results")}
        environment.pop("COLUMNS", None)
        folder = self.folder(block)
        if block.language == "python":
            script = self.root / "scripts" / f"{block.name.replace('/', '_').replace(':', '_')}.py"
            script.parent.mkdir(exist_ok=True)
            script.write_text(script_of(block), encoding="utf-8")
            return _run([sys.executable, str(script)], folder, environment)
        proc = None
        for command in commands_of(block):
            if not_run_reason(command) is not None:
                continue
            assert command[0] == "corral", (
                f"{block.name} runs {command[0]!r}, which no rule of tests/test_docs_examples.py covers: "
                "make it a corral command, add a rule to NOT_RUN_COMMANDS, or mark the block <!-- not run: why -->"
            )
            proc = _run([sys.executable, "-m", "corral.cli", *command[1:]], folder, environment)
            if proc.returncode != 0:
                break
        return proc


def script_of(block: Block) -> str:
    """A python block's script: the block, after the section's previous python block where it continues that one."""
    if "continues the block above" not in block.markers:
        return block.code
    previous = [b for b in earlier_in_section(block) if b.language == "python"]
    assert previous, f"{block.name} continues the block above, and no python block comes before it in its section"
    return script_of(previous[-1]) + block.code


def _run(command: list[str], folder: Path, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def sections(tmp_path_factory: pytest.TempPathFactory) -> Sections:
    """Working folders shared by the blocks of a section, for this module."""
    return Sections(tmp_path_factory.mktemp("docs_examples"))


@pytest.mark.parametrize("block", [case(block) for block in RUN])
def test_the_block_runs_as_printed(block: Block, sections: Sections) -> None:
    for earlier in earlier_in_section(block):  # what it builds on, if this block runs alone (pytest -k)
        if earlier.name not in sections.done:
            sections.run(earlier)
    proc = sections.run(block)
    assert proc is not None
    assert proc.returncode == 0, (
        f"{block.name} failed (exit status {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )


def test_every_block_that_is_not_run_says_why() -> None:
    unexplained = [block.name for block in ALL_BLOCKS if "not run" in block.markers and not block.markers["not run"].strip()]
    assert not unexplained, f"<!-- not run: REASON --> needs its reason: {unexplained}"
    continued = [block.name for block in RUN if "continues the block above" in block.markers and block.language != "python"]
    assert not continued, f"only a python block continues the one above: {continued}"


def test_the_readme_has_runnable_blocks_of_both_kinds_and_a_fresh_process_restore() -> None:
    """The rules above would pass on a README whose blocks were all excluded: they are not."""
    readme = [block for block in RUN if block.document.name == "README.md"]
    assert {block.language for block in readme} >= {"python", "bash"}
    saves = [b for b in readme if b.language == "python" and ".save(" in b.code]
    restores = [b for b in readme if b.language == "python" and "from_checkpoint(" in b.code and ".save(" not in b.code]
    assert any(r.section == s.section and r.line > s.line for s in saves for r in restores), (
        "the README saves a checkpoint in one block and reopens it in a later block of its section (a fresh process)"
    )

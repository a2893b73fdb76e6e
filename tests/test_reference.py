"""The generated reference docs match the code, and undocumented fields or hooks are caught."""

from __future__ import annotations

import pytest

import corral.reference as reference
from corral.core import AlgorithmConfig, hookspecs, option


def test_everything_of_corrals_own_is_documented() -> None:
    assert reference.undocumented() == []


@pytest.mark.parametrize("path", list(reference.reference_files()), ids=lambda p: p.name)
def test_committed_reference_docs_match_the_code(path) -> None:
    expected = reference.reference_files()[path]
    assert path.exists() and path.read_text() == expected, (
        f"{path} is out of date with the code; run `python -m corral.reference --write` and commit it"
    )


def test_a_field_without_a_docstring_is_reported(monkeypatch) -> None:
    class GappyConfig(AlgorithmConfig):
        documented: int = option(1, "training")
        """has a docstring"""
        forgotten: int = option(2, "training")

    monkeypatch.setattr(reference, "_config_classes", lambda: {"Gappy": GappyConfig})
    assert reference.undocumented() == ["GappyConfig.forgotten"]


def test_a_hook_argument_missing_from_the_glossary_is_reported(monkeypatch) -> None:
    glossary = {k: v for k, v in hookspecs.HOOK_ARGUMENTS.items() if k != "train_batch"}
    monkeypatch.setattr(hookspecs, "HOOK_ARGUMENTS", glossary)
    assert reference.undocumented() == ["hook on_learn_on_batch argument train_batch"]


def test_the_command_fails_when_the_docs_are_stale(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(reference, "DOCS", tmp_path)
    assert reference.main([]) == 1
    assert "run python -m corral.reference --write" in capsys.readouterr().err
    assert reference.main(["--write"]) == 0 and reference.main([]) == 0

"""`kvlint paths` speaks as `kvlint check` does: the same severity words and (relative) paths, and every cell
`check` reports a divergence for — a finding, or a related location, naming that kind inside that path's
function — is marked `*` in the matrix. On the miniature vLLM (fast) and on the real 0.29.0, where the
simple_kv_offload scheduler's MambaSpec cells read `dcp` while `check` reports KV102 errors there."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kvlint_runner import run_kvlint
from mini_vllm import MINI_VLLM, write_tree


def function_lines(root: Path, module_path: str, line: int) -> tuple[int, int]:
    tree = ast.parse((root / module_path).read_text(encoding="utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.lineno == line)
    return node.lineno, node.end_lineno


def reported_by_check(root: Path, cwd: Path, check: list[dict], matrix: dict) -> set[tuple[str, str]]:
    """(path name, kind) for every kind a check finding (or related location) names inside a path's function."""
    labels = {kind["label"] for kind in matrix["kinds"]}
    cells = set()
    for path in matrix["paths"]:
        first, last = function_lines(root, path["module_path"], path["line"])
        for finding in check:
            for place in (finding, *finding["related"]):
                relative = (cwd / place["path"]).resolve().relative_to(root.resolve()).as_posix()
                if relative == path["module_path"] and first <= place["line"] <= last:
                    cells.update((path["name"], kind) for kind in place["kinds"] if kind in labels)
    return cells


def marked_in_text(text: str) -> set[tuple[str, str]]:
    """(path name, kind) of every cell the text matrix marks `*`."""
    lines = text.splitlines()
    legend = {
        line.split("]")[0].strip(" ["): line.split("]", 1)[1].split("(")[0].strip()
        for line in lines
        if line.startswith("  [")
    }
    header = next(i for i, line in enumerate(lines) if line.startswith("kind"))
    letters = lines[header].split()[1:]
    marked = set()
    for line in lines[header + 2 :]:
        if not line.strip():
            break
        cells = line.split()
        kind = " ".join(cells[: -len(letters)]).removesuffix(" †")
        marked.update((legend[letter], kind) for letter, value in zip(letters, cells[-len(letters) :]) if "*" in value)
    return marked


def assert_agreement(root: Path, cwd: Path, *target: str) -> tuple[str, list[dict]]:
    check = json.loads(run_kvlint("check", "--output-format", "json", *target, cwd=cwd).stdout)
    full = run_kvlint("check", *target, cwd=cwd).stdout
    matrix = json.loads(run_kvlint("paths", "--format", "json", *target, cwd=cwd).stdout)
    text = run_kvlint("paths", *target, cwd=cwd).stdout
    expected = reported_by_check(root, cwd, check, matrix)
    assert expected, "check reports nothing in the matrix's paths"
    assert expected <= marked_in_text(text)
    by_name = {p["name"]: p for p in matrix["paths"]}
    index = {kind["label"]: i for i, kind in enumerate(matrix["kinds"])}
    for name, kind in expected:  # the JSON matrix says the same
        assert by_name[name]["reported"][index[kind]], (name, kind)
    # the findings listed under the matrix are check's own lines, word for word
    listed = text.split("`kvlint check` reports in these paths", 1)[1].split("\n", 2)[2]
    blocks = [block for block in listed.strip("\n").split("\n\n")]
    assert blocks and all(block in full for block in blocks)
    assert not any(word in text for word in ("[error]", "[warning]"))
    return text, check


def test_paths_and_check_agree_on_the_miniature_vllm(tmp_path):
    root = write_tree(tmp_path, MINI_VLLM)
    assert_agreement(root, root, ".")


@pytest.mark.slow
def test_paths_and_check_agree_on_029(vllm_release, tmp_path):
    root = vllm_release("0.29.0")
    text, check = assert_agreement(root, tmp_path, "--vllm-release", "0.29.0")
    # the simple_kv_offload scheduler's MambaSpec cells: KV102 errors in check, marked in the matrix
    marked = marked_in_text(text)
    assert any("simple_kv_offload" in name and kind == "MambaSpec" for name, kind in marked), marked

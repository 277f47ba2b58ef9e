"""Code copied from the target release (issue 28, "Code copied from the target"): a plugin function whose body is
one of the target's (the same syntax tree: its name, docstring, comments and formatting may differ) gets the
verdict the original gets inside the tree — here a check the tree's scheduler module holds, which the tree
never reports (its config is the scheduler's), copied into a plugin's free function. A body changed by one
name is the plugin's own and judged as such. Offline, against tests/plugin_packages.py's fake releases."""

from __future__ import annotations

import ast
import json
import textwrap
from types import SimpleNamespace

import pytest

from kvlint.analysis import copied_functions
from kvlint.analysis.copied_functions import functions, node_keys, original_of
from kvlint.engine.copies import judged_as_originals
from kvlint.types import Finding, Severity
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.plugin_packages import ROLE_MODULES, install_fake_releases
from tests.test_plugin_roles import PYPROJECT, line_of

ORIGINAL = """
    from vllm.v1.kv_cache_interface import AttentionSpec


    class Scheduler(SchedulerInterface):
        def _attention_groups(self, kv_cache_config):
            \"\"\"The groups of attention layers.\"\"\"
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, AttentionSpec)]
    """

COPIES = """
    from vllm.v1.kv_cache_interface import AttentionSpec, FullAttentionSpec


    def attention_groups(self, kv_cache_config):
        # copied from vLLM's scheduler
        return [
            g
            for g in kv_cache_config.kv_cache_groups
            if isinstance(g.kv_cache_spec, AttentionSpec)
        ]


    def full_attention_groups(self, kv_cache_config):
        return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, FullAttentionSpec)]
    """


@pytest.fixture
def fake_releases(tmp_path, monkeypatch) -> list[str]:
    monkeypatch.setitem(ROLE_MODULES, "vllm/v1/core/sched/scheduler.py", ORIGINAL)
    return install_fake_releases(tmp_path, monkeypatch)


def test_a_check_copied_from_the_targets_scheduler_gets_the_trees_verdict(tmp_path, fake_releases):
    files = {"pyproject.toml": PYPROJECT, "plugin/__init__.py": "", "plugin/copies.py": COPIES}
    package = write_tree(tmp_path / "pkg", files)
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", ".", cwd=package)
    assert completed.returncode == 1, completed.stderr
    found = [f["line"] for f in json.loads(completed.stdout)]
    assert found == [line_of(COPIES, "isinstance(g.kv_cache_spec, FullAttentionSpec)")], found


def source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")  # numbered as line_of numbers it


def test_a_copys_nodes_line_up_with_the_originals_whatever_its_layout():
    texts = {"vllm/v1/core/sched/scheduler.py": source(ORIGINAL).encode(), "vllm/other.py": b"x = 1\n"}
    copy, changed = (function for _, function in functions(ast.parse(source(COPIES))))
    assert original_of(texts, copy) == "vllm/v1/core/sched/scheduler.py:Scheduler._attention_groups"
    assert original_of(texts, changed) is None  # FullAttentionSpec: another body
    theirs, mine = node_keys(ast.parse(source(ORIGINAL)).body[1].body[0]), node_keys(copy)
    # The `isinstance` call is at the same place of both bodies, on another line and column.
    their_line, my_line = line_of(ORIGINAL, "isinstance"), line_of(COPIES, "if isinstance")
    their_column = source(ORIGINAL).splitlines()[their_line - 1].index("isinstance") + 1
    my_column = source(COPIES).splitlines()[my_line - 1].index("isinstance") + 1
    assert mine[(my_line, my_column)] == theirs[(their_line, their_column)]


def finding_at(path: str, text: str, marker: str, severity) -> Finding:
    line = line_of(text, marker)
    column = source(text).splitlines()[line - 1].index("isinstance") + 1
    return Finding(path, line, column, line, column + 10, "KV101", "container-isinstance", "m", severity)


def test_a_copy_takes_the_severity_the_tree_gives_the_original(tmp_path):
    write_tree(tmp_path / "tree", {"vllm/v1/core/sched/scheduler.py": ORIGINAL})
    project = SimpleNamespace(root=str(tmp_path / "tree"), judges_outside=True)
    request = SimpleNamespace(project=project, module_path="plugin/copies.py", rules=(SimpleNamespace(CODE="KV101"),))
    mine = [
        finding_at("plugin/copies.py", COPIES, "if isinstance", Severity.ERROR),
        finding_at("plugin/copies.py", COPIES, "FullAttentionSpec)]", Severity.ERROR),  # not a copy: its own
    ]
    theirs = [finding_at("vllm/v1/core/sched/scheduler.py", ORIGINAL, "isinstance", Severity.WARNING)]
    judged = judged_as_originals(request, ast.parse(source(COPIES)), mine, lambda *_: theirs)
    assert [f.severity for f in judged] == [Severity.WARNING, Severity.ERROR]
    # Another scan (another index), whose tree reports nothing there: the copy's finding is dropped.
    request.project = SimpleNamespace(root=project.root, judges_outside=True)
    assert judged_as_originals(request, ast.parse(source(COPIES)), mine, lambda *_: []) == mine[1:]


def test_a_module_of_the_tree_is_parsed_once_however_many_copies_are_looked_up(monkeypatch):
    # A connector of 40 functions holding findings parsed the tree's matching modules 40 times (10 s on 0.29.0).
    original = source(ORIGINAL) + "\n\n    def _twin(self, kv_cache_config):\n" + source(ORIGINAL).split('"""\n')[-1]
    texts = {"vllm/v1/core/sched/scheduler_many.py": original.encode(), "vllm/other.py": b"kv_cache_spec = 1\n"}
    parsed: list[bytes] = []
    real_parse = ast.parse

    def counting(data, *args, **kwargs):
        parsed.append(data)
        return real_parse(data, *args, **kwargs)

    copies = [next(f for _, f in functions(ast.parse(source(COPIES)))) for _ in range(30)]
    monkeypatch.setattr(ast, "parse", counting)
    monkeypatch.setattr(copied_functions, "_PRINTS", {})  # as in a new process
    found = {original_of(texts, copy) for copy in copies}
    # the first of two functions with one body, as a walk of the module meets them
    assert found == {"vllm/v1/core/sched/scheduler_many.py:Scheduler._attention_groups"}
    assert parsed.count(texts["vllm/v1/core/sched/scheduler_many.py"]) == 1

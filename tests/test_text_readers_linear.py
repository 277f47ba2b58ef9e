"""The index's text readers cost time linear in a module a pull request controls (a red team's crafted inputs, each
a few kilobytes, stalled a scan for minutes before): the candidates' calls of construction sites, the (spec, dcp)
helper signature, DCP aliases and the accessors' returned expressions. Each is also read as before."""

from __future__ import annotations

import time

import pytest

from kvlint.analysis.construction_sites import scheduler_built_classes
from kvlint.analysis.flow.consumers import _RETURNS
from kvlint.analysis.sizing.program import helper_signature
from kvlint.analysis.vocabulary import DEFAULT_SCHEDULER_ONLY_PATHS, dcp_aliases

LIMIT_S = 5  # each crafted input took from 20 s to minutes; linear reading takes milliseconds


def bounded(function, *arguments):
    started = time.monotonic()
    result = function(*arguments)
    assert time.monotonic() - started < LIMIT_S
    return result


MANAGER = b"class Evil:\n    def f(self, c):\n        c.kv_cache_groups\n        return isinstance(s, AttentionSpec)\n"


def test_a_run_of_hashes_after_a_candidates_name_is_read_once():
    crafted = MANAGER + b"class FooScheduler:\n    pass\nEvil " + b"#" * 40 + b"\n"
    texts = {"vllm/v1/worker/evil.py": crafted}
    assert bounded(scheduler_built_classes, texts, DEFAULT_SCHEDULER_ONLY_PATHS, frozenset({"AttentionSpec"})) == set()
    # A call behind a comment is still a call (a comment ends at `\n` or `\r`).
    texts = {"vllm/v1/worker/evil.py": MANAGER}
    for end in (b"\n", b"\r", b"\r\n"):
        texts["vllm/v1/core/sched/scheduler.py"] = b"x = (Evil  # the manager" + end + b"(c))\n"
        assert scheduler_built_classes(texts, DEFAULT_SCHEDULER_ONLY_PATHS, frozenset({"AttentionSpec"})) == {"Evil"}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("def resolve(spec, dcp_size):\n", True),
        ("def resolve(kv_cache_spec: KVCacheSpec, dcp_world_size: int) -> int:\n", True),
        ("DEF Resolve(SPEC, DCP):\n", True),  # any case, as before
        ("def resolve(dcp_size, spec):\n", False),  # the spec first
        ("def resolve(spec):\n    dcp = 1\n", False),  # the DCP size past the parameters' `)`
        ("def resolve(specs, xdcp):\n", False),  # whole words only
        ("def a(spec def b(dcp):\n", True),  # one `)` for both: as the pattern read it
    ],
)
def test_a_helper_signature(text, found):
    assert helper_signature(text) is found


def test_a_crafted_line_of_defs_is_read_once():
    assert bounded(helper_signature, "dcp = 1\n" + "def f(spec " * 4000) is False


def test_dcp_aliases_of_a_crafted_line():
    assert dcp_aliases("self.cp_world_size = dcp_world_size\nx = cp_world_size  # alias\n") == {"cp_world_size", "x"}
    assert dcp_aliases("myself.size = dcp_size\n") == {"size"}
    crafted = "block_size = 16\n" + "dcp" + "a" * 20_000 + " = " + "b" * 20_000 + " c\n"
    assert bounded(dcp_aliases, crafted) == frozenset()


def test_an_accessors_returned_expression():
    assert _RETURNS.findall("    def pulls(self):\n        return self._pulls   \n") == ["self._pulls"]
    assert _RETURNS.findall("    return (a and\n") == ["(a and"]
    crafted = "    def pulls(self):\n        return self.x" + " " * 40_000 + "y\n"
    assert bounded(_RETURNS.findall, crafted) == ["self.x" + " " * 40_000 + "y"]

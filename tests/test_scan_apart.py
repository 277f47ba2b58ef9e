"""A function run apart (kvlint.scan.apart): its result comes back, what it allocated does not stay in this
process, and a child that fails leaves the work to this process."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from kvlint.collector import return_free_memory
from kvlint.scan.apart import run_apart

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or multiprocessing.get_start_method() != "fork", reason="processes are not forked here"
)


def _resident_mib() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def test_the_result_comes_back_from_a_child_process():
    assert run_apart(os.getpid) != os.getpid()  # computed in another process
    assert run_apart(lambda: {"values": list(range(5))}) == {"values": [0, 1, 2, 3, 4]}


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="no /proc to read this process's memory from")
def test_what_the_function_allocates_is_not_kept_by_this_process():
    kept: list = []

    def build() -> int:
        # ~150 MiB of small objects, one in a hundred kept past the call (as caches keep a few of a census's
        # objects): the allocator's arenas stay mapped around those in the process that made them.
        held = [(i, str(i), [i]) for i in range(1_000_000)]
        kept.extend(held[::100])
        return len(held)

    before = _resident_mib()
    assert run_apart(build) == 1_000_000
    assert not kept and _resident_mib() - before < 50


def test_a_child_that_fails_or_returns_what_does_not_pickle_leaves_the_work_to_this_process():
    parent = os.getpid()

    def fails_apart() -> int:
        if os.getpid() != parent:
            raise RuntimeError("only in the child")
        return 7

    assert run_apart(fails_apart) == 7

    def unpicklable():
        return lambda: os.getpid()

    assert run_apart(unpicklable)() == parent  # made here: a lambda does not cross processes


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="no /proc to read this process's memory from")
def test_memory_the_allocator_holds_free_goes_back_before_a_child_is_forked():
    """A child forked after a `fix` would otherwise start with the parser's freed buffers resident: glibc keeps
    what it frees, and the benchmark counts every process's resident set (106 → 58 MiB parent on vLLM 0.34.0)."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim  # noqa: B018 - only glibc has it
    except AttributeError:
        pytest.skip("no glibc: nothing to give back")

    blocks = [bytes(1000) + bytes([n % 256]) for n in range(60_000)]  # malloc'd, not Python's small-object arenas
    kept = blocks[::1000]  # a few survive, as the index's objects do: the heap cannot just shrink from its top
    held = _resident_mib()
    del blocks
    return_free_memory()
    assert _resident_mib() < held - 30 and len(kept) == 60

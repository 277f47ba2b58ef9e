"""Run a function in a forked child process and take back its result: what it allocated goes back to the system
when the child ends.

The tree index is small (~0.2 MB pickled on vLLM 0.34.0) but building it takes ~230 MiB: the census's syntax
trees, freed at the end yet kept by the allocator, whose arenas stay mapped around the few objects that
survive. Built in the scan's own process, every worker forked for the lint afterwards starts as large as that
process, and the scan's process tree holds several times the index build's peak. Built apart, the scan's
process keeps the index only, and its workers start small.

Where processes are not forked (macOS, Windows) or the child fails (killed, out of memory, an object that does
not pickle), the function runs here instead: the same result, the memory as before.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import TypeVar

from kvlint.collector import return_free_memory

T = TypeVar("T")


def run_apart(function: Callable[[], T]) -> T:
    """`function()`, computed in a forked child when this platform forks, else here."""
    import multiprocessing

    if not hasattr(os, "fork") or multiprocessing.get_start_method() != "fork":
        return function()
    return_free_memory()  # the child starts with what this process holds resident, shared or not
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, and leave without running the parent's exit handlers
        code = 1
        try:
            os.close(read)
            data = pickle.dumps(function(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write, "wb") as sent:
                sent.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as received:
            data = received.read()
    finally:
        _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return function()
    return pickle.loads(data)

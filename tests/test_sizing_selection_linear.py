"""Which modules the sizing program reads for themselves (kvlint.analysis.sizing.program.sizes_blocks): a block size
near a DCP size, lines counted as Python's `splitlines` counts them, in time linear in a module a pull request
controls (each block-size line compared with every DCP line took minutes on a crafted module)."""

from __future__ import annotations

import time

import pytest

from kvlint.analysis.sizing.program import sizes_blocks


@pytest.mark.parametrize(
    ("text", "near"),
    [
        ("x = spec.block_size * dcp_size\n", True),
        ("n = spec.block_size\n" + "pass\n" * 7 + "m = n * dcp_size\n", True),  # 8 lines on: within the window
        ("n = spec.block_size\n" + "pass\n" * 8 + "m = n * dcp_size\n", False),
        ("m = dcp_size\n" + "pass\n" * 7 + "n = spec.block_size\n", True),  # the DCP size first
        ("n = block_size * dcp_size\n", False),  # a block size of no spec
        # Lines as splitlines counts them: a form feed or a lone carriage return ends one; `\r\n` ends one.
        ("n = spec.block_size\f" + "pass\f" * 8 + "m = n * dcp_size\n", False),
        ("n = spec.block_size\r\n" + "pass\r\n" * 7 + "m = n * dcp_size\r\n", True),
        ("n = spec.block_size\r" + "pass\r" * 8 + "m = n * dcp_size\r", False),
    ],
)
def test_a_block_size_near_a_dcp_size(text, near):
    assert sizes_blocks(text) is near


def test_a_crafted_module_costs_linear_time():
    text = "dcp = 1\n" * 50_000 + "pass\n" * 10 + "n = spec.block_size\n" * 50_000  # no pair within the window
    started = time.monotonic()
    assert sizes_blocks(text) is False
    assert time.monotonic() - started < 5

"""The scheduler-consumed reading (kvlint.analysis.flow.consumers) costs time linear in a file a pull request
controls: a file's class and def lines are found once, not once per read of an accessor (20,000 reads in one
file took minutes when each re-scanned the text above it)."""

from __future__ import annotations

import time

from kvlint.analysis.flow.consumers import scheduler_consumed_members

ACCESSOR = "class Half:\n    def pulls(self):\n        return self._pulls\n\n\nclass Other:\n    def pulls(self):\n"


def test_many_reads_of_an_accessor_cost_linear_time():
    reads = "".join(f"        x{i} = self.inner.pulls\n" for i in range(20_000))  # delegating reads: each looked at
    texts = {"vllm/distributed/kv_transfer/kv_connector/v1/crafted.py": (ACCESSOR + reads).encode()}
    started = time.monotonic()
    consumed = scheduler_consumed_members(texts, ())
    assert time.monotonic() - started < 5
    assert consumed == frozenset({"pulls"})  # read only by a member of its own name: nobody else consumes it

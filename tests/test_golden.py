"""Golden outputs on real vLLM releases: what `check --format json`, `paths`, `containers` and `fix --diff` print.

They pin kvlint's output so that a refactor can prove it changed nothing. A deliberate change of output
regenerates them (`KVLINT_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`) and says so in its commit.
Each command runs in the release's folder with `.` as target, so paths are relative and machine-independent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("KVLINT_UPDATE_GOLDEN") == "1"

CASES = [
    ("check-json", "0.27.1", ["check", "--no-cache", "--format", "json", "."]),
    ("check-json", "0.29.0", ["check", "--no-cache", "--format", "json", "."]),
    ("check-json", "0.30.0", ["check", "--no-cache", "--format", "json", "."]),
    ("check-json", "0.33.0", ["check", "--no-cache", "--format", "json", "."]),
    ("check-json", "0.34.0", ["check", "--no-cache", "--format", "json", "."]),
    ("paths", "0.29.0", ["paths", "."]),
    ("paths", "0.34.0", ["paths", "."]),
    ("containers", "0.34.0", ["containers", "."]),
    ("fix-diff", "0.29.0", ["fix", "--no-cache", "--diff", "."]),
    ("fix-diff", "0.34.0", ["fix", "--no-cache", "--diff", "."]),
]


@pytest.mark.parametrize(("kind", "version", "arguments"), CASES, ids=[f"{k}-{v}" for k, v, _ in CASES])
def test_output_matches_the_golden_file(kind, version, arguments, vllm_release, kvlint_in_release):
    completed = kvlint_in_release(version, *arguments)  # shared with tests/test_real_releases.py
    assert completed.returncode in (0, 1), completed.stderr
    # The release folder's absolute location differs between machines; the output must not depend on it.
    output = completed.stdout.replace(str(vllm_release(version)), "<release>")
    golden = GOLDEN / f"{kind}-{version}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(output, encoding="utf-8")
    assert golden.is_file(), f"{golden} is missing: run with KVLINT_UPDATE_GOLDEN=1 once"
    assert output == golden.read_text(encoding="utf-8")

"""A check after an edit judges each changed file by what the census reads of it (kvlint.analysis.census_selection)
without importing the census's readers: a fresh interpreter asked about a model, a layer and a platform module
holds no census module after."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from kvlint.scan.tree_snapshot import could_matter
answers = [
    could_matter("vllm/model_executor/models/x.py", b"class XForCausalLM:\\n    pass\\n"),
    could_matter("vllm/model_executor/layers/y.py", b"# a comment only\\n"),
    could_matter("vllm/platforms/cpu.py", b"class CpuPlatform: pass\\n"),
    could_matter("vllm/v1/worker/gpu_worker.py", b"if self.use_v2_model_runner: pass\\n"),
]
loaded = sorted(m for m in sys.modules if m.startswith(("kvlint.analysis.census.", "kvlint.analysis.platform_reach",
                                                        "kvlint.analysis.runner_reach")) or m == "kvlint.analysis.census")
print(json.dumps([answers, loaded]))
"""


def test_judging_a_changed_model_file_imports_no_census_reader():
    completed = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    answers, loaded = json.loads(completed.stdout)
    model, comment_only, platform, worker = answers
    assert isinstance(model, str) and len(model) == 16  # a fingerprint: only a change of it matters
    assert isinstance(comment_only, str) and comment_only != model
    assert platform is True and worker is True
    assert loaded == []

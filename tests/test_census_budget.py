"""A crafted tree cannot stall the census (issue 27 item 2): no pattern backtracks over a long run of
blanks, a ring of model modules costs its size, and past its budget the census stops and the tree index says
"cross-file analysis incomplete". Each scan runs in a child process with a time limit, so that the old
(cubic) code fails the test in seconds instead of hanging it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.mini_vllm import write_tree
from tests.test_compositions import files

ROOT = Path(__file__).resolve().parents[1]
# The old code took minutes on each of these trees, the new one under a second: one child process scans them
# all (one interpreter start), and is killed past the limit.
LIMIT_S = 30
SCAN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kvlint.analysis.tree_index import build_tree_index
    for root in sys.argv[1:]:
        start = time.monotonic()
        index = build_tree_index(Path(root))
        print(round(time.monotonic() - start, 2), len(index.compositions or ()), len(index.failures), flush=True)
    """
)


def crafted_grouping_module() -> dict[str, str]:
    # `isinstance(v,` + 5,000 spaces + a dotted class beside a `from_specs` call: cubic in the old filter pattern.
    tree = files()
    tree["vllm/v1/core/crafted.py"] = (
        "from vllm.v1 import kv_cache_interface as kvi\n\n"
        "def group(specs):\n"
        "    kept = {k: v for k, v in specs.items() if isinstance(v," + " " * 5000 + "kvi.AttentionSpec)}\n"
        "    return kvi.UniformTypeKVCacheSpecs.from_specs(kept)\n"
    )
    return tree


def unclosed_headers_and_blank_runs() -> dict[str, str]:
    tree = files()
    # `class A(` with no `)`: the old class pattern read to the end of the module from each one.
    tree["vllm/model_executor/models/unclosed.py"] = 'x = """\n' + "class A(\n" * 15000 + '"""\n'
    # Blank lines in the registry: the old entry pattern crossed them from every line start.
    tree["vllm/model_executor/models/registry.py"] = "\n" * 30000 + tree["vllm/model_executor/models/registry.py"]
    return tree


RING = 3000


def ring_of_model_modules() -> dict[str, str]:
    """Each model module imports the next; ring0's model alone builds an indexer beside its MLA."""
    tree = files()
    entries = "".join(f'    "Ring{i}ForCausalLM": ("ring{i}", "Ring{i}ForCausalLM"),\n' for i in range(RING))
    tree["vllm/model_executor/models/registry.py"] = "_MODELS = {\n" + entries + "}\n"
    for i in range(RING):
        following = (i + 1) % RING
        tree[f"vllm/model_executor/models/ring{i}.py"] = (
            f"from .ring{following} import helper{following}\n\n"
            f"def helper{i}():\n    return 1\n\n"
            f"class Ring{i}ForCausalLM:\n    def __init__(self):\n        self.attn = MLAAttention()\n"
            + ("        self.indexer = IndexerCache()\n" if i == 0 else "")
        )
    return tree


def test_crafted_modules_cannot_stall_the_census(tmp_path):
    trees = {
        "grouping": crafted_grouping_module(),
        "unclosed": unclosed_headers_and_blank_runs(),
        "ring": ring_of_model_modules(),
    }
    roots = [str(write_tree(tmp_path / name, tree)) for name, tree in trees.items()]
    completed = subprocess.run(
        [sys.executable, "-c", SCAN, *roots], capture_output=True, text=True, timeout=LIMIT_S, cwd=ROOT
    )
    assert completed.returncode == 0, completed.stderr
    results = dict(zip(trees, (line.split() for line in completed.stdout.splitlines())))
    for name, (seconds, compositions, failures) in results.items():
        assert float(seconds) < 3 and int(compositions) and failures == "0", name
    # Every module of the ring reaches ring0's indexer through its imports (the old census's reading, kept by
    # this fix): one MLA + indexer container per model.
    assert int(results["ring"][1]) == RING


def test_past_its_budget_the_census_says_the_analysis_is_incomplete(tmp_path, monkeypatch):
    from kvlint.analysis import census_budget
    from kvlint.analysis.tree_index import build_tree_index

    root = write_tree(tmp_path / "tree", files())
    assert build_tree_index(root).container_compositions()
    monkeypatch.setattr(census_budget, "DEFAULT_BUDGET", 1000)
    index = build_tree_index(root)
    assert index.container_compositions() is None
    assert any(line.startswith("cross-file analysis incomplete: the census") for line in index.failures)

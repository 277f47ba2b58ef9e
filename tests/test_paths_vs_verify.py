"""The static sizing matrix (`kvlint paths`) predicts the runtime one (`kvlint verify`) on real vLLM 0.29.0.

For every cell both cover — a spec kind, DCP=2, one sizing path in the view its role sees — the static
analysis says the path disagrees with the scheduler exactly when the real, imported vLLM does.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kvlint.commands.paths import paths
from kvlint.commands.verify import verify

# verify's group kinds → paths' kind labels
KINDS = {
    "full_attention": "FullAttentionSpec",
    "mla": "MLAAttentionSpec",
    "sliding_window": "SlidingWindowSpec",
    "mamba": "MambaSpec",
    "dsa_container": "UniformTypeKVCacheSpecs{MLA, indexer}",
    "full_attention_container": "UniformTypeKVCacheSpecs{FullAttention×2}",
}
# verify's runtime column → (static path function, the view of the config that role sees)
COLUMNS = {
    "offloading[worker]": ("build_offloading_config", "group"),
    "offloading[scheduler]": ("build_offloading_config", "scheduler"),
    "managers": ("KVCacheCoordinator.__init__", "scheduler"),
}
DCP, BLOCK_SIZE = 2, 16


@pytest.fixture(scope="module")
def runtime(vllm_runtime_env):
    return vllm_runtime_env  # conftest: built once per session, and only for tests marked slow


@pytest.mark.slow
def test_static_disagreements_match_runtime_disagreements(runtime):
    tree = str(runtime.site_packages)  # the very tree verify imports
    static = json.loads(CliRunner().invoke(paths, [tree, "--format", "json"]).stdout)
    measured = CliRunner().invoke(
        verify, ["--python", str(runtime.python), "--vllm", tree, "--format", "json", "--dcp", str(DCP)]
    )
    assert measured.exit_code in (0, 1), measured.output
    cells = {cell["kind"]: cell for cell in json.loads(measured.stdout)["cells"] if cell["dcp"] == DCP}

    labels = [kind["label"] for kind in static["kinds"]]
    by_function = {path["function"]: path for path in static["paths"]}
    compared = []
    for kind, label in KINDS.items():
        runtime_cell = cells[kind]
        reference = runtime_cell["paths"]["scheduler"]
        assert reference == BLOCK_SIZE * DCP  # every single-group kind: the scheduler scales by DCP
        for column, (function, view) in COLUMNS.items():
            factor = by_function[function]["views"][view][labels.index(label)]
            if factor == "?":
                continue
            predicted_span = BLOCK_SIZE * (DCP if factor == "dcp" else 1)
            static_disagrees = predicted_span != reference
            runtime_disagrees = runtime_cell["paths"][column] != reference  # an error message disagrees too
            compared.append((kind, column, factor, runtime_cell["paths"][column]))
            assert static_disagrees == runtime_disagrees, (kind, column, factor, runtime_cell["paths"][column])
    assert len(compared) >= 15
    # The case the product exists for is among them.
    assert ("dsa_container", "offloading[worker]", "1") == compared[
        [c[:2] for c in compared].index(("dsa_container", "offloading[worker]"))
    ][:3]

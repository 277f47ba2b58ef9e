"""The sizing shapes plugins write (issue 28, "The plugins' sizing shapes"), each alone in its file so that the
cheap prefilters must admit it too: `size *= dcp * pcp`, an alias of the block size or of a product holding the
DCP size, a gate the other way round (`1 if isinstance(…) else dcp`). KV102 finds each where it computes a
group's span; only the canonical shape keeps its automatic fix, the others say why they have none."""

from __future__ import annotations

import json

import pytest

from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.plugin_packages import install_fake_releases

PYPROJECT = '[project]\nname = "shapes"\nversion = "1.0"\ndependencies = ["vllm==0.29.0"]\n'

SHAPES = {
    "compound": """
        def spans(kv_cache_config, dcp, pcp):
            for group in kv_cache_config.kv_cache_groups:
                size = group.kv_cache_spec.block_size
                size *= dcp * pcp
                yield size
        """,
    "alias_of_product": """
        def spans(kv_cache_config, dcp, pcp):
            cp_scale = pcp * dcp
            return [g.kv_cache_spec.block_size * cp_scale for g in kv_cache_config.kv_cache_groups]
        """,
    "alias_of_block_size": """
        def spans(kv_cache_config, dcp_world_size):
            out = []
            for group in kv_cache_config.kv_cache_groups:
                bs = group.kv_cache_spec.block_size
                out.append(bs * dcp_world_size)
            return out
        """,
    "inverted_gate": """
        from vllm.v1.kv_cache_interface import MambaSpec


        def spans(kv_cache_config, dcp):
            return [
                g.kv_cache_spec.block_size * (1 if isinstance(g.kv_cache_spec, MambaSpec) else dcp)
                for g in kv_cache_config.kv_cache_groups
            ]
        """,
}
LINES = {"compound": 4, "alias_of_product": 3, "alias_of_block_size": 5, "inverted_gate": 6}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("shapes")
    with pytest.MonkeyPatch.context() as monkeypatch:
        install_fake_releases(root, monkeypatch)
        files = {f"plugin/{name}.py": text for name, text in SHAPES.items()}
        package = write_tree(root / "pkg", {"pyproject.toml": PYPROJECT, **files})
        completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV102", ".", cwd=package)
    return {f["path"].split("/")[-1].removesuffix(".py"): f for f in json.loads(completed.stdout)}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_plugin_shape_is_found_where_it_computes_a_groups_span(found, shape):
    assert shape in found, sorted(found)
    assert found[shape]["line"] == LINES[shape]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_no_shape_but_the_canonical_one_gets_a_fix_and_each_says_why(found, shape):
    finding = found[shape]
    assert finding["fix"] is None and finding["fix_unavailable"].startswith("no automatic fix")


def test_the_reason_names_what_the_resolver_call_would_drop(found):
    assert "multiplies the DCP size by `pcp` too" in found["compound"]["fix_unavailable"]
    assert "`cp_scale` = `pcp * dcp`" in found["alias_of_product"]["fix_unavailable"]
    assert "is not the resolver's shape" in found["inverted_gate"]["fix_unavailable"]

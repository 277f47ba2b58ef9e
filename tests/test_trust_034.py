"""Issue 14 on the real trees: every error a divergence with a counterexample the tree builds, hand copies
that agree today are warnings that say so, and the 0.29.0 defects stay errors.

The sites are the ones an engineer who knows vLLM's KV cache code read finding by finding; each assertion
names the line and why it is (or is not) reported.
"""

from __future__ import annotations

import re

import pytest

from test_real_releases import check

pytestmark = pytest.mark.slow  # scans real releases (shared with the golden files' scans)

CONNECTORS = "vllm/distributed/kv_transfer/kv_connector/v1/"
MANAGER = "vllm/v1/core/single_type_kv_cache_manager.py"
HAND_COPIES_034 = [
    ("vllm/benchmarks/forward/batch.py", 50),
    (CONNECTORS + "moriio/moriio_connector.py", 624),
    (CONNECTORS + "moriio/moriio_connector.py", 1369),
    (MANAGER, 770),
    ("vllm/v1/worker/gpu/warmup.py", 74),
]


def at(findings, path, line, code=None):
    return [f for f in findings if f["path"] == path and f["line"] == line and (code is None or f["code"] == code)]


@pytest.fixture(scope="module")
def scan_034(kvlint_in_release):
    return check(kvlint_in_release, "0.34.0")[1]


@pytest.fixture(scope="module")
def scan_029(kvlint_in_release):
    return check(kvlint_in_release, "0.29.0")[1]


@pytest.mark.parametrize(("path", "line"), HAND_COPIES_034)
def test_034_hand_copies_are_warnings_that_say_they_agree_today(scan_034, path, line):
    [finding] = at(scan_034, path, line, "KV102")
    assert finding["severity"] == "warning"
    assert "agrees with it for every kind that reaches it today" in finding["message"]
    assert "drifts when the resolver changes" in finding["message"]
    assert "call `resolve_dcp_kv_block_size(" in finding["message"]


def test_034_a_name_rebound_to_a_layer_is_not_a_group_spec(scan_034):
    # coordinator.py:490 `spec = _unwrap_spec(spec)`: the check on 491 sees a layer spec.
    assert at(scan_034, CONNECTORS + "mooncake/store/coordinator.py", 491) == []


def test_034_a_gate_on_an_earlier_line_is_the_resolver_rule(scan_034):
    # :108 `self.dcp_world_size = dcp_world_size if kv_cache_spec.dcp_sharded else 1`, :110 scales by it.
    [finding] = at(scan_034, MANAGER, 110, "KV102")
    assert finding["severity"] == "warning"
    assert "whatever the spec kind" not in finding["message"]
    assert "`self.dcp_world_size` = `dcp_world_size if kv_cache_spec.dcp_sharded else 1`" in finding["message"]
    assert finding["fix"]["applicability"] == "safe"


def test_034_one_look_at_the_layers_does_not_unwrap_the_spec(scan_034):
    # `_get_startup_fill_group_ids`: `iter_layer_specs(spec)` on :115, `isinstance(spec, AttentionSpec)` on :117.
    [finding] = at(scan_034, CONNECTORS + "decode_bench_connector.py", 117, "KV101")
    assert finding["severity"] == "error" and " by default has them put in one container by `" in finding["message"]
    assert "iter_layer_specs(spec)" in finding["message"]


def census_of(vllm_release, version):
    from kvlint.analysis.tree_index import build_tree_index

    return build_tree_index(vllm_release(version)).container_compositions()


_BUILT = re.compile(
    r"UniformTypeKVCacheSpecs of (?P<layers>.+?) layers while each layer answers True: (?P<model>\S+) "
    r"(?:by default|under (?P<setting>.+?) \(opt-in\)) has them put in one container by `(?P<path>\w+)` "
    r"\(\S+:(?P<line>\d+)\)"
)


@pytest.mark.parametrize("version", ["0.29.0", "0.30.0", "0.33.0", "0.34.0"])
def test_every_kv101_names_the_model_setting_and_path_that_build_its_container(
    kvlint_in_release, vllm_release, version
):
    """An error: a model of the tree builds the container by default; a warning: only an opt-in setting does
    (named). Each claim is checked against the census itself, not against a list of sites."""
    census = census_of(vllm_release, version)
    kv101 = [f for f in check(kvlint_in_release, version)[1] if f["code"] == "KV101"]
    assert kv101
    for finding in kv101:
        claim = _BUILT.search(finding["message"])
        assert claim is not None, finding["message"]
        layers = frozenset(claim["layers"].split(", "))
        built = [
            c
            for c in census
            if c.model == claim["model"] and c.layer_classes == layers and c.path.endswith(":" + claim["path"])
        ]
        assert built, finding["message"]
        if finding["severity"] == "error":
            assert claim["setting"] is None and any(c.is_default for c in built)
        else:
            assert "VLLM_KV_CACHE_LAYOUT=" in claim["setting"] and not any(c.is_default for c in built)


def test_034_every_error_names_its_counterexample(scan_034):
    errors = [f for f in scan_034 if f["severity"] == "error"]
    assert errors
    for finding in errors:
        assert finding["code"] == "KV101", finding  # no hand-written scaling of 0.34.0 disagrees with the resolver
        assert " by default has them put in one container by `" in finding["message"]
    assert not [f for f in scan_034 if f["code"] == "KV000"]


def test_029_the_offloading_defect_stays_an_error_on_every_rule(scan_029):
    config = CONNECTORS + "offloading/config.py"
    [scaling] = at(scan_029, config, 44, "KV102")
    assert scaling["severity"] == "error" and scaling["fix"]["applicability"] == "safe"
    assert "16 tokens per block for a UniformTypeKVCacheSpecs{MLA, indexer} group" in scaling["message"]
    assert "at DCP=2 where `resolve_dcp_kv_block_size` gives 32" in scaling["message"]
    # the same root cause: the container check, the predicate and the divergent path are its related locations
    related = {(r["code"], r["line"]) for r in scaling["related"]}
    assert related == {("KV101", 47), ("KV105", 47), ("KV103", 29)}
    [certifiable] = at(scan_029, config, 154, "KV101")  # spec_certifiable
    assert certifiable["severity"] == "error" and "spec_certifiable()" in certifiable["message"]


@pytest.mark.parametrize("line", [111, 231, 355, 376, 595])
def test_029_simple_kv_offload_scales_mamba(scan_029, line):
    [finding] = at(scan_029, "vllm/v1/simple_kv_offload/manager.py", line, "KV102")
    assert finding["severity"] == "error"
    assert "32 tokens per block for a MambaSpec group at DCP=2" in finding["message"]
    assert "gives 16" in finding["message"]


def test_029_cpu_runner_zeroing_and_managers_helper_stay_errors(scan_029):
    [zeroing] = at(scan_029, "vllm/v1/worker/cpu_model_runner.py", 186, "KV101")
    assert zeroing["severity"] == "error"
    [helper] = at(scan_029, "vllm/v1/core/kv_cache_utils.py", 678, "KV105")
    assert helper["severity"] == "error" and "dcp_world_size_for_kv_cache_spec" in helper["message"]
    # The coordinator's path diverges through that helper: one defect, reported at the helper.
    assert at(scan_029, "vllm/v1/core/kv_cache_coordinator.py", 72, "KV103") == []
    [coordinator] = [r for r in helper["related"] if r["path"].endswith("vllm/v1/core/kv_cache_coordinator.py")]
    assert coordinator["code"] == "KV103" and "ChunkedLocalAttentionSpec" in coordinator["message"]


def test_029_encoder_only_checks_are_gone(scan_029):
    # The runner appends encoder-only specs as plain groups: no container holds one.
    runner = [f for f in scan_029 if f["path"] == "vllm/v1/worker/gpu_model_runner.py"]
    assert not [f for f in runner if f["line"] in (2363, 4201, 4398)]
    assert not [f for f in scan_029 if "EncoderOnlyAttentionSpec" in f["message"] and f["code"] == "KV101"]

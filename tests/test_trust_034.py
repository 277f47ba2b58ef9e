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


def test_034_a_product_that_ignores_the_flag_the_tree_clears_has_no_safe_fix(scan_034):
    # :1088 `kv_cache_spec.block_size * dcp_world_size` for a sliding-window spec, whose `dcp_sharded` the V2
    # runner clears for a draft model's layers: the resolver would leave such a spec unscaled.
    [finding] = at(scan_034, MANAGER, 1088, "KV102")
    assert finding["fix"]["applicability"] == "unsafe"


def test_034_one_look_at_the_layers_does_not_unwrap_the_spec(scan_034):
    # `_get_startup_fill_group_ids`: `iter_layer_specs(spec)` on :115, `isinstance(spec, AttentionSpec)` on :117.
    # A model still builds the container by default, but the connector exists for benchmarks only (issue 26):
    # reported, as a warning that says why it is not an error.
    [finding] = at(scan_034, CONNECTORS + "decode_bench_connector.py", 117, "KV101")
    assert (
        finding["severity"] == "warning"
        and " with default settings has them put in one container by `" in finding["message"]
    )
    # The witness is a DSA checkpoint: DeepseekV3ForCausalLM builds the indexer only on a config branch (`is_v32`).
    assert (
        "a DeepseekV3ForCausalLM checkpoint whose config builds DeepseekV32IndexerCache (deepseek_v2.py:"
        in (finding["message"])
    )
    assert "a warning, not an error: the code exists for benchmarks only (“" in finding["message"]
    assert "iter_layer_specs(spec)" in finding["message"]


def census_of(vllm_release, version):
    from kvlint.analysis.tree_index import build_tree_index

    return build_tree_index(vllm_release(version)).container_compositions()


_BUILT = re.compile(
    r"UniformTypeKVCacheSpecs of (?P<layers>.+?) layers while each layer answers True: (?:a )?(?P<model>\S+)"
    r"(?: checkpoint whose config builds .+?)? "
    r"(?:with default settings|possibly \((?P<link>.+?)\)|under (?P<setting>.+?) \(opt-in\)) "
    r"has them put in one container by `(?P<path>\w+)` \(\S+:(?P<line>\d+)\)"
)
_PLATFORM_LINK = re.compile(r"that the (?P<platform>\w+) platform builds it is unproven: ")
# Why a container some model builds by default is still only a warning (issue 26): no user meets the defect.
_NOT_AN_ERROR = re.compile(
    r"; a warning, not an error: the (?:check refuses what it cannot vouch for on purpose|code exists for benchmarks only) \(“.+?”\)"
)


@pytest.mark.parametrize("version", ["0.29.0", "0.30.0", "0.33.0", "0.34.0"])
def test_every_kv101_names_the_model_setting_and_path_that_build_its_container(
    kvlint_in_release, vllm_release, version
):
    """An error: a model of the tree builds the container by default; a warning: only an opt-in setting does
    (named), the census could not prove a link (named), or the default container meets no user as a defect
    (a deliberate fail-closed check, benchmark-only code: said why). Each claim is checked against the census
    itself, not against a list of sites."""
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
        unmet = _NOT_AN_ERROR.search(finding["message"])
        if finding["severity"] == "error":
            assert claim["setting"] is None and claim["link"] is None and unmet is None
            assert any(c.is_default for c in built)
        elif claim["setting"] is not None:
            assert "VLLM_KV_CACHE_LAYOUT=" in claim["setting"] and not any(c.is_default for c in built)
            assert any(c.setting == "opt-in: " + claim["setting"] for c in built), finding["message"]
        elif claim["link"] is not None and _PLATFORM_LINK.match(claim["link"]):
            # The census builds it (asserted above), but the flagged code runs only on a platform whose backend
            # selection refuses the witness's layers (kvlint.analysis.platform_reach): that link is the one said.
            assert _PLATFORM_LINK.match(claim["link"])["platform"] in finding["path"], finding["path"]
        elif claim["link"] is not None:
            assert not any(c.is_default for c in built)
            assert any(c.setting == "possible: " + claim["link"] for c in built), finding["message"]
        else:
            assert any(c.is_default for c in built) and unmet is not None, finding["message"]


def test_034_every_error_names_its_counterexample(scan_034):
    # Issue 26: an error needs a proven witness. 0.34.0 has none left: no hand-written scaling disagrees with the
    # resolver, its packed containers need an opt-in layout (and mixed page sizes), and the one default container
    # meets benchmark-only code. So every KV101 names its counterexample, and says why it is only a warning.
    assert [f for f in scan_034 if f["severity"] == "error"] == []
    kv101 = [f for f in scan_034 if f["code"] == "KV101"]
    assert kv101
    for finding in kv101:
        assert " has them put in one container by `" in finding["message"], finding
        if " with default settings has them put in one container by `" in finding["message"]:
            assert _NOT_AN_ERROR.search(finding["message"]), finding
        else:
            assert " (opt-in) has them" in finding["message"] or " possibly (" in finding["message"], finding
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
    # spec_certifiable: a container does reach it, but the check refuses on purpose what it cannot vouch for (its
    # comment says so): a deliberate fail-closed check is a warning that says why (issue 26).
    [certifiable] = at(scan_029, config, 154, "KV101")
    assert certifiable["severity"] == "warning" and "spec_certifiable()" in certifiable["message"]
    assert " with default settings has them put in one container by `" in certifiable["message"]
    assert "a warning, not an error: the check refuses what it cannot vouch for on purpose (“" in certifiable["message"]


@pytest.mark.parametrize("line", [355, 376, 595])
def test_029_simple_kv_offload_scales_mamba(scan_029, line):
    # Issue 26: MambaManager.find_longest_cache_hit asserts `dcp_world_size == 1`, but the 0.29.0 coordinator hands
    # a Mamba group's manager a per-kind DCP of 1 (dcp_world_size_for_kv_cache_spec): a hybrid model under DCP is
    # accepted, and its Mamba group is sized 32 here where the scheduler sizes 16.
    [finding] = at(scan_029, "vllm/v1/simple_kv_offload/manager.py", line, "KV102")
    assert finding["severity"] == "error"
    assert "32 tokens per block for a MambaSpec group at DCP=2" in finding["message"]
    assert "gives 16" in finding["message"]
    assert "rejects under DCP" not in finding["message"]
    # The witness generates tokens (a pooling model, e.g. ColBERT, is not what a maintainer checks first) and builds
    # Mamba layers (Cosmos3 Edge hands NemotronHModel attention and MLP layer types only: the maintainer reading);
    # an MLA + linear-attention hybrid, whose MLA groups are the ones vLLM shards under DCP (read per layer since
    # issue 26's per-layer branches; FalconH1 was named before).
    assert (
        "a hybrid model, e.g. BailingMoeV3ForCausalLM (BailingMoeV3KimiDeltaAttention, MLAAttention)"
        in finding["message"]
    )


@pytest.mark.parametrize("line", [111, 231])
def test_029_simple_kv_offload_scaling_no_mamba_group_consumes_is_a_warning(scan_029, line):
    # Issue 26: the value a Mamba group would get wrong is never consumed for one. :111 scales the group whose
    # index an earlier `isinstance(…, FullAttentionSpec)` chose; :231's Mamba branch never reads `block_size`.
    [finding] = at(scan_029, "vllm/v1/simple_kv_offload/manager.py", line, "KV102")
    assert finding["severity"] == "warning"
    assert "restates `resolve_dcp_kv_block_size` by hand (no gate: the DCP size for every kind)" in finding["message"]
    assert "it agrees with it for every kind that reaches it today" in finding["message"]
    assert "MambaSpec" not in finding["message"]


def test_029_cpu_runner_zeroing_is_a_warning_and_managers_helper_diverges_only_where_dcp_is_refused(scan_029):
    # Issue 26: the CPU platform's backend selection refuses sparse attention, and the DSA layers pick it at run time
    # (`use_sparse=self.is_sparse`): a CPU-only module meets that container only possibly, said as the link.
    [zeroing] = at(scan_029, "vllm/v1/worker/cpu_model_runner.py", 186, "KV101")
    assert zeroing["severity"] == "warning"
    assert "that the cpu platform builds it is unproven" in zeroing["message"]
    # Issue 26: the helper differs from the resolver only for kinds vLLM refuses at startup under DCP > 1 (the
    # coordinator's and the spec's asserts): no counterexample vLLM accepts, so a warning that names the guards.
    [helper] = at(scan_029, "vllm/v1/core/kv_cache_utils.py", 678, "KV105")
    assert helper["severity"] == "warning" and "dcp_world_size_for_kv_cache_spec" in helper["message"]
    assert "only for kinds vLLM rejects under DCP (HybridKVCacheCoordinator.__init__ asserts" in helper["message"]
    # The coordinator's path diverges through that helper: one defect, reported at the helper.
    assert at(scan_029, "vllm/v1/core/kv_cache_coordinator.py", 72, "KV103") == []
    [coordinator] = [r for r in helper["related"] if r["path"].endswith("vllm/v1/core/kv_cache_coordinator.py")]
    assert coordinator["code"] == "KV103" and "ChunkedLocalAttentionSpec" in coordinator["message"]


def test_029_encoder_only_checks_are_gone(scan_029):
    # The runner appends encoder-only specs as plain groups: no container holds one.
    runner = [f for f in scan_029 if f["path"] == "vllm/v1/worker/gpu_model_runner.py"]
    assert not [f for f in runner if f["line"] in (2363, 4201, 4398)]
    assert not [f for f in scan_029 if "EncoderOnlyAttentionSpec" in f["message"] and f["code"] == "KV101"]

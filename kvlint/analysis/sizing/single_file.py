"""A lone file's sizing analysis, for a scan without a tree: the file against built-in definitions.

The built-in definitions are vLLM 0.29.0's resolver and scheduler path (like hierarchy.BUILTIN_BASES);
the file's own definitions take precedence.
"""

from __future__ import annotations

import ast

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.sizing.matrix import analyse_program
from kvlint.analysis.sizing.program import Program, parse_module, spec_classes
from kvlint.analysis.sizing.results import SizingAnalysis

BUILTIN_MODULE = "vllm/v1/core/kv_cache_utils.py"
BUILTIN_SOURCE = """
def iter_layer_specs(kv_cache_spec):
    if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):
        return kv_cache_spec.kv_cache_specs.values()
    return (kv_cache_spec,)


def resolve_dcp_kv_block_size(spec, dcp_world_size):
    layer_specs = iter_layer_specs(spec)
    if len(layer_specs) > 0 and all(isinstance(layer_spec, AttentionSpec) for layer_spec in layer_specs):
        return spec.block_size * dcp_world_size
    return spec.block_size


def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    groups = kv_cache_config.kv_cache_groups
    group_block_sizes = [resolve_dcp_kv_block_size(g.kv_cache_spec, dcp) for g in groups]
    return group_block_sizes
"""

# Every rule of one file asks for the same analysis: it is computed once per text (and kept bounded).
_CACHE: dict[tuple[str, int], SizingAnalysis | None] = {}
_CACHE_SIZE = 256


def analyse_single_file(module_path: str, text: str, hierarchy: SpecHierarchy) -> SizingAnalysis | None:
    """A lone file against the built-in definitions (its own take precedence): for scans without a tree."""
    key = (module_path, hash(text))
    if key in _CACHE:
        return _CACHE[key]
    result = _analyse(module_path, text, hierarchy)
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.clear()
    _CACHE[key] = result
    return result


def _analyse(module_path: str, text: str, hierarchy: SpecHierarchy) -> SizingAnalysis | None:
    module = parse_module(module_path, text)
    if module is None:
        return None
    modules = {module_path: module}
    builtin = parse_module(BUILTIN_MODULE, BUILTIN_SOURCE)
    if builtin is not None:
        own = set(module.functions)
        builtin.functions = {n: f for n, f in builtin.functions.items() if n not in own}
        builtin.tree.body = [n for n in builtin.tree.body if not (isinstance(n, ast.FunctionDef) and n.name in own)]
        if module_path != BUILTIN_MODULE:
            modules[BUILTIN_MODULE] = builtin
        else:
            module.functions = {**builtin.functions, **module.functions}
    try:
        return analyse_program(
            Program(hierarchy, spec_classes(module, hierarchy), modules, None, source=f"{module_path} (alone)")
        )
    except RecursionError:
        return None

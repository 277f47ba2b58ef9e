"""A file outside the vLLM tree analysed as one of the modules of the release it targets.

A plugin's sizing code is judged as the release would judge a module of its own: the release's analysis
(TreeIndex.sizing) names the files it read (`SizingAnalysis.modules`); they are read again, the plugin's
module joins them when the release's analysis would select it, and the one analysis (kvlint.analysis.sizing.
matrix) compares the plugin's paths and predicates with that release's yardstick — its
`resolve_dcp_kv_block_size` (0.29+, by class or by `dcp_sharded`), or, without one, what its KV cache
managers allocate. Only the plugin's paths are evaluated (`Program.focus`), and only its divergences kept:
the release's own are the release's findings, not the plugin's. The release's modules are parsed once per
process; a fetched release never changes under its root.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.sizing.kinds import SpecKind
from kvlint.analysis.sizing.matrix import analyse_program
from kvlint.analysis.sizing.program import (
    Program,
    calls_a_helper,
    parse_module,
    read_program,
    sizes_blocks,
    spec_classes,
)
from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.analysis.sizing.values import Layer
from kvlint.analysis.tree_files import TreeFiles
from kvlint.analysis.vocabulary import ATTENTION_ROOT, CONTAINER_CLASS, INTERFACE_MODULE

# The releases' programs (root, files) and every rule's analysis of one text: computed once, kept bounded.
_PROGRAMS: dict[tuple[str, tuple[str, ...], int], Program] = {}
_ANALYSES: dict[tuple[str, str, int, int, int], SizingAnalysis | None] = {}
_KEPT = 256


def analyse_against_target(
    module_path: str, text: str, root: str, release: SizingAnalysis, hierarchy: SpecHierarchy
) -> SizingAnalysis | None:
    """The analysis of a file outside the tree as a module of the release at `root`, whose analysis is
    `release`; `hierarchy`: the release's, with the plugin's own spec classes. None when the release's
    analysis would not read the file (it sizes no block near a DCP size) or it does not parse."""
    # The release's analysis in the keys: a tree named again under one root in one process is read again.
    key = (root, module_path, hash(text), hash(tuple(sorted(hierarchy.bases.items()))), hash(release.paths))
    if key not in _ANALYSES:
        if len(_ANALYSES) > _KEPT:
            _ANALYSES.clear()
        program = _release_program(root, release, hierarchy)
        _ANALYSES[key] = _analyse(module_path, text, program, hierarchy, _kinds(release.kinds, hierarchy))
    return _ANALYSES[key]


def _analyse(
    module_path: str, text: str, release: Program, hierarchy: SpecHierarchy, kinds: tuple[SpecKind, ...]
) -> SizingAnalysis | None:
    if not (sizes_blocks(text) or calls_a_helper(text, release.modules.values())):
        return None
    module = parse_module(module_path, text, partial=True)
    if module is None:
        return None
    interface = release.modules.get(INTERFACE_MODULE)
    classes = {
        **(spec_classes(interface, hierarchy) if interface is not None else {}),
        **spec_classes(module, hierarchy),
    }
    program = dataclasses.replace(
        release,
        hierarchy=hierarchy,
        classes=classes,
        modules=dict(sorted({**release.modules, module_path: module}.items())),
        focus=frozenset({module_path}),
        kinds=kinds,
        source=f"{module_path} (against {release.source})",
    )
    try:
        return analyse_program(program)
    except RecursionError:
        return None


def _release_program(root: str, release: SizingAnalysis, hierarchy: SpecHierarchy) -> Program:
    key = (root, release.modules, hash(release.paths))
    if key not in _PROGRAMS:
        if len(_PROGRAMS) > 4:  # a scan targets one release, a range two
            _PROGRAMS.clear()
        only = frozenset(release.modules)
        _PROGRAMS[key] = read_program(Path(root), hierarchy, only, TreeFiles(Path(root), only))
    return _PROGRAMS[key]


def _kinds(kinds: tuple[SpecKind, ...], hierarchy: SpecHierarchy) -> tuple[SpecKind, ...]:
    """The release's kinds (as its analysis read them, refusals included), and a kind for each concrete class
    of `hierarchy` they lack (the plugin's own spec classes, kvlint.analysis.own_specs), refused where a refused
    ancestor is."""
    known = {kind.label: kind for kind in kinds if not kind.is_container}
    roots = {n for n, bases in hierarchy.bases.items() if not any(b in hierarchy.bases for b in bases)}
    abstract = roots | {ATTENTION_ROOT, CONTAINER_CLASS}
    own = []
    for name in hierarchy.bases:
        if name in known or name in abstract:
            continue
        refusals = (known[a].rejected_under_dcp for a in sorted(hierarchy.ancestors(name)) if a in known)
        own.append(SpecKind(name, Layer(name), next((r for r in refusals if r), None)))
    return (*kinds, *own)


def analyse_package_against_target(
    texts: dict[str, str], root: str, release: SizingAnalysis, hierarchy: SpecHierarchy
) -> SizingAnalysis:
    """The matrix of a plugin's files against the release at `root` (`kvlint paths`): the release's yardstick
    columns once, then each file's own paths and predicates as `check` analyses that file (module path → text)."""
    analyses = [
        (path, a) for path, text in texts.items() if (a := analyse_against_target(path, text, root, release, hierarchy))
    ]
    if not analyses:  # no file sizes a block: the release's yardstick alone
        yardsticks = tuple(p for p in release.paths if p.role in ("reference", "resolver", "allocator"))
        return dataclasses.replace(release, paths=yardsticks, divergences=())
    first = analyses[0][1]
    yardsticks = tuple(p for p in first.paths if p.module_path not in texts)
    own = tuple(p for path, analysis in analyses for p in analysis.paths if p.module_path == path)
    divergences = tuple(d for _, analysis in analyses for d in analysis.divergences)
    return dataclasses.replace(first, paths=yardsticks + own, divergences=divergences, source=release.source)

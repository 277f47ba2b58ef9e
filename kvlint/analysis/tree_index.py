"""What a whole vLLM tree knows, read statically: its spec class hierarchy, where the resolver lives and
how it decides, and the cross-file sizing analysis.

Built once per scan in the parent process and handed to every file's rules as plain, picklable data.
The scanned code is parsed with `ast`, never imported. Caching it between scans is kvlint.scan's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kvlint.analysis.census.budget import Budget, BudgetExceeded
from kvlint.analysis.census.compositions import ContainerComposition, compose
from kvlint.analysis.census.parsing import ModuleTrees
from kvlint.analysis.census.paths import read_grouping_paths
from kvlint.analysis.census.reading import Census, read_census
from kvlint.analysis.census.uniformity import uniform_bases
from kvlint.analysis.census_inputs import census_inputs_digest
from kvlint.analysis.census_selection import could_shape_census
from kvlint.analysis.construction_sites import ModuleSites, read_construction_sites
from kvlint.analysis.containers import ContainerReachability, container_reachability
from kvlint.analysis.flow.consumers import scheduler_consumed_members
from kvlint.analysis.hierarchy import SpecHierarchy, hierarchy_of_source
from kvlint.analysis.kind_table import KindTable, table_from_hierarchy, table_from_sizing
from kvlint.analysis.platform_reach import PlatformReach, read_platform_reach
from kvlint.analysis.plugin_roles import TreeRoles, read_tree_roles
from kvlint.analysis.resolver import clears_dcp_sharded, find_resolver, read_resolver_rule
from kvlint.analysis.runner_reach import read_runner_selection
from kvlint.analysis.sizing.matrix import build_sizing_analysis
from kvlint.analysis.sizing.program import could_size
from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.analysis.sizing.single_file import BUILTIN_MODULE
from kvlint.analysis.target_names import TargetNames, dotted
from kvlint.analysis.tree_files import TreeFiles
from kvlint.analysis.vocabulary import (
    CONTAINER_CLASS,
    DEFAULT_SCHEDULER_ONLY_PATHS,
    INTERFACE_MODULE,
    RESOLVER_NAME,
    could_construct,
    could_consume,
    could_shape_roles,
    is_worker_module,
)


@dataclass(frozen=True)
class ResolverView:
    """The one answer, per scan, to "what is hand-written sizing compared with, and can a fix call it":
    every rule words its findings from it, so that two findings of one root cause never contradict.

    - "tree": the scanned tree defines the shared resolver (`qualified`); compared with it, fixes call it;
    - "builtin": no vLLM tree (a lone file, code outside vLLM): compared with vLLM's resolver as kvlint
      knows it (vLLM 0.29.0's, kvlint.analysis.sizing.single_file), which the scanned code does not define,
      so no fix imports it;
    - "none": a vLLM tree older than the resolver (< 0.29): compared with the scheduler's own path.
    """

    source: str
    qualified: str | None = None  # `module:function` of the resolver compared with ("tree", "builtin")
    # Code outside the vLLM tree judged against this release (TreeIndex.target): its vLLM's resolver, not its own.
    outside: bool = False
    # The targeted releases that lack the resolver ("tree"): a remedy or fix must not call it.
    lacking: tuple[str, ...] = ()

    @property
    def module(self) -> str | None:
        return self.qualified.split(":")[0] if self.qualified else None


@dataclass(frozen=True)
class TreeIndex:
    root: str | None
    hierarchy: SpecHierarchy
    resolver_module: str | None = None
    resolver_path: str | None = None
    # The classes the resolver's per-layer isinstance check accepts (0.29/0.30: AttentionSpec);
    # empty when it decides otherwise (0.33: reads `dcp_sharded`).
    resolver_layer_classes: frozenset[str] = frozenset()
    # 0.31+: the resolver reads `spec.dcp_sharded` instead of checking classes.
    resolver_reads_dcp_sharded: bool = False
    # Where the tree builds a spec with `dcp_sharded` cleared, when the resolver reads the flag: then the flag
    # is an instance's, not its class' ("path:line"; "" when none does).
    dcp_sharded_cleared_at: str = ""
    # The cross-file sizing analysis, computed once per scan; None without a tree or when it failed.
    sizing: SizingAnalysis | None = None
    # Which spec classes a container the tree builds can hold (kvlint.analysis.containers); None: not read.
    containers: ContainerReachability | None = None
    # What the analysis could not read or do, one line each (kvlint.analysis.tree_files): the scan reports
    # them, so that a cross-file finding never vanishes in silence. Empty when it read everything.
    failures: tuple[str, ...] = ()
    # The kinds of group spec with the reference sizing rule's factor for each (from the sizing analysis).
    kinds: KindTable | None = None
    # The tree's models and their layers (kvlint.analysis.census); None: no model registry read.
    census: Census | None = None
    # The containers its models build, path by path (kvlint.analysis.census.compositions); None: not read.
    compositions: tuple[ContainerComposition, ...] | None = None
    # Connector members only scheduler-side code reads (kvlint.analysis.flow.consumers).
    scheduler_consumed: frozenset[str] = frozenset()
    # Classes only scheduler-only code constructs: they see the scheduler's config (construction_sites).
    scheduler_built: frozenset[str] = frozenset()
    # Code outside the tree judged against this release: which names every release it targets defines
    # (kvlint.analysis.target_names). None: the scanned code is this tree's own, or targets this release alone.
    target: TargetNames | None = None
    # The layers code that runs on one platform only never meets (kvlint.analysis.platform_reach).
    platform_reach: PlatformReach = PlatformReach()
    # Runner code a worker runs only when a setting selects it: (folder, setting, where) (runner_reach).
    runner_selection: tuple[tuple[str, str, str], ...] = ()
    # The classes whose subclasses outside the tree run with the scheduler's config (kvlint.analysis.plugin_roles).
    roles: TreeRoles = TreeRoles()
    # The scanned package's own spec classes in `hierarchy` (kvlint.analysis.own_specs), each with its bases there.
    own_specs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The scan judges code outside this tree against it (a reference release: kvlint.scan.targets).
    judges_outside: bool = False
    # The digest of what the census, compositions and platform reach were read from (census_inputs): the
    # next build of this tree keeps them when it is unchanged. Not part of what a file's result depends on.
    census_inputs: str = ""
    # What each module read for `scheduler_built` said (construction_sites): the next build reads again only the
    # modules that changed. Like census_inputs, not part of what a file's result depends on.
    construction_sites: tuple[ModuleSites, ...] = ()

    def lacked_by(self, module: str, name: str) -> tuple[str, ...]:
        """The targeted releases that lack `name` in `module` (dotted): a remedy or fix must not name it."""
        return self.target.lacked_by(module, name) if self.target is not None else ()

    def interface_functions(self) -> frozenset[str]:
        """The interface's functions a remedy or a fix may name: the tree's, less any a targeted release lacks."""
        interface = dotted(INTERFACE_MODULE)
        return frozenset(f for f in self.hierarchy.functions if not self.lacked_by(interface, f))

    def container_compositions(self) -> tuple[ContainerComposition, ...] | None:
        """Every container composition a model of the tree builds: (layer classes, spec classes, setting
        "default" or "opt-in: …", model, path "module:function", line), defaults first. None when the tree's
        models or grouping code were not read (no tree, no model registry): nothing can be said."""
        return self.compositions

    def kind_table(self) -> KindTable | None:
        """The kinds a hand-written scaling is compared on: the tree's, or the hierarchy's without a tree."""
        if self.kinds is not None:
            return self.kinds
        return table_from_hierarchy(
            self.hierarchy, self.resolver_layer_classes, self.resolver_reads_dcp_sharded, self.has_resolver
        )

    @property
    def has_resolver(self) -> bool:
        return self.resolver_module is not None

    @property
    def resolver_view(self) -> ResolverView:
        """What this scan compares hand-written sizing with (see ResolverView)."""
        if self.resolver_module is not None:
            lacking = self.lacked_by(self.resolver_module, RESOLVER_NAME)
            return ResolverView("tree", f"{self.resolver_module}:{RESOLVER_NAME}", self.target is not None, lacking)
        if self.root is None:
            return ResolverView("builtin", f"{BUILTIN_MODULE[: -len('.py')].replace('/', '.')}:{RESOLVER_NAME}")
        return ResolverView("none")

    def resolver_scales(self, spec_class: str) -> bool | None:
        """Whether the tree's resolver applies the DCP factor to a (non-container) spec of this class.

        None when the resolver's rule cannot be read statically.
        """
        if self.resolver_layer_classes:
            return any(self.hierarchy.is_subclass(spec_class, c) for c in self.resolver_layer_classes)
        if self.resolver_reads_dcp_sharded:
            default = self.hierarchy.attribute_default(spec_class, "dcp_sharded")
            return {"True": True, "False": False}.get(default or "")
        return None


def build_tree_index(
    root: Path,
    scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS,
    could_matter_files: frozenset[str] | None = None,
    overlay: dict[str, bytes] | None = None,
    earlier: TreeIndex | None = None,
    census_kept: bool = False,
) -> TreeIndex:
    """The index of the tree at `root`. `could_matter_files`: when known, the only files (relative to
    root) whose text the sizing analysis needs to read; `scheduler_only_paths` decides its roles;
    `overlay` (relative path → bytes): texts that stand in for those files of the tree (see TreeFiles);
    `earlier`: an index of this tree before a change, whose census is kept when its inputs are the same, or when
    `census_kept` (the index cache saw no change of them since `earlier` was built; kvlint.scan.tree_snapshot)."""
    files = TreeFiles(root, could_matter_files, overlay)
    hierarchy = hierarchy_of_source(files.read_if_present(INTERFACE_MODULE), str(root / INTERFACE_MODULE))
    census_wanted = CONTAINER_CLASS in hierarchy.bases
    census_texts, consumer_texts, builder_texts, role_texts, sizing_texts, cleared = _selected_texts(
        files, census_wanted
    )
    inputs = census_inputs_digest(census_texts, files, hierarchy) if census_wanted else ""
    same_inputs = (
        earlier is not None and bool(earlier.census_inputs) and (census_kept or earlier.census_inputs == inputs)
    )
    if earlier is not None and inputs and same_inputs and not earlier.failures:
        census, compositions, reach = earlier.census, earlier.compositions, earlier.platform_reach
    else:
        # Parsed once for the census and the platform reach, which read many of the same modules.
        trees = ModuleTrees(census_texts)
        census, compositions = _read_compositions(
            census_texts if census_wanted else None, hierarchy, files, trees=trees
        )
        reach = read_platform_reach(root, files, census, census_texts, trees)
        del trees  # the trees are the index build's largest transient: not kept past it
    built_specs = tuple(dict.fromkeys(c.spec_classes for c in compositions)) if compositions is not None else None
    sizing = build_sizing_analysis(
        root, hierarchy, could_matter_files, scheduler_only_paths, files, built_specs, sizing_texts
    )
    if compositions is not None:
        # The census replaces the class-level reading: which layers the tree builds is not which containers.
        default = {spec for c in compositions if c.is_default for spec in c.spec_classes}
        containers = ContainerReachability(frozenset(hierarchy.bases), built_members=frozenset(default))
    else:
        containers = container_reachability(
            root,
            hierarchy,
            could_matter_files,
            interface_module=INTERFACE_MODULE,
            container_class=CONTAINER_CLASS,
            files=files,
        )
    consumed = scheduler_consumed_members(consumer_texts, scheduler_only_paths)
    built, sites = read_construction_sites(
        builder_texts, scheduler_only_paths, frozenset(hierarchy.bases), earlier.construction_sites if earlier else ()
    )
    roles = read_tree_roles(role_texts, scheduler_only_paths)
    workers = {r: d for r in files.relatives() if is_worker_module(r) and (d := files.read(r)) is not None}
    runners = read_runner_selection(workers)
    resolver_path = find_resolver(root, files)
    if resolver_path is None:
        kinds = table_from_sizing(sizing, hierarchy) if sizing is not None else None
        return TreeIndex(
            root=str(root),
            hierarchy=hierarchy,
            sizing=sizing,
            containers=containers,
            failures=tuple(dict.fromkeys(files.failures)),
            kinds=kinds,
            census=census,
            compositions=compositions,
            scheduler_consumed=consumed,
            scheduler_built=built,
            platform_reach=reach,
            runner_selection=runners,
            roles=roles,
            census_inputs=inputs,
            construction_sites=sites,
        )
    relative = resolver_path.relative_to(root)
    rule = read_resolver_rule(resolver_path, files.overlay.get(relative.as_posix()))
    static = table_from_hierarchy(hierarchy, rule.layer_classes, rule.reads_dcp_sharded, has_resolver=True)
    kinds = table_from_sizing(sizing, hierarchy, static) if sizing is not None else static
    return TreeIndex(
        root=str(root),
        hierarchy=hierarchy,
        resolver_module=".".join(relative.with_suffix("").parts),
        resolver_path=str(resolver_path),
        resolver_layer_classes=rule.layer_classes,
        resolver_reads_dcp_sharded=rule.reads_dcp_sharded,
        dcp_sharded_cleared_at=cleared if rule.reads_dcp_sharded else "",
        sizing=sizing,
        containers=containers,
        failures=tuple(dict.fromkeys(files.failures)),  # a file several readers missed is said once
        kinds=kinds,
        census=census,
        compositions=compositions,
        scheduler_consumed=consumed,
        scheduler_built=built,
        platform_reach=reach,
        runner_selection=runners,
        roles=roles,
        census_inputs=inputs,
        construction_sites=sites,
    )


def _selected_texts(files: TreeFiles, census_wanted: bool) -> tuple:
    """(the texts the census reads, the texts the consumer model reads, the texts construction sites are read
    in, the texts the plugin roles are read from, the texts the sizing program reads, where a spec's
    `dcp_sharded` is cleared or ""), in one pass over the tree's files."""
    cleared = ""
    census_texts: dict[str, bytes] = {}
    consumer_texts: dict[str, bytes] = {}
    builder_texts: dict[str, bytes] = {}
    role_texts: dict[str, bytes] = {}
    sizing_texts: dict[str, bytes] = {}
    for relative in files.relatives():
        data = files.read(relative)
        if data is None:
            continue
        if census_wanted and could_shape_census(relative, data):
            census_texts[relative] = data
        if could_consume(relative, data):
            consumer_texts[relative] = data
        if could_construct(data):
            builder_texts[relative] = data
        if could_shape_roles(relative):
            role_texts[relative] = data
        if could_size(relative, data):
            sizing_texts[relative] = data
        cleared = cleared or clears_dcp_sharded(relative, data)
    return census_texts, consumer_texts, builder_texts, role_texts, sizing_texts, cleared


def _read_compositions(
    texts: dict[str, bytes] | None, hierarchy: SpecHierarchy, files: TreeFiles, budget=None, trees=None
):
    """(census, compositions) of the tree; (None, None) without a model registry or a container class, or
    when the census ran past its budget (a crafted tree: said as a failure, never a stall)."""
    if texts is None:
        return None, None
    budget = budget if budget is not None else Budget()
    try:
        census = read_census(texts, frozenset(hierarchy.bases), budget, trees)
        if census is None:
            return None, None
        paths = read_grouping_paths(texts, CONTAINER_CLASS, budget, frozenset(hierarchy.bases))
    except (BudgetExceeded, RecursionError) as exceeded:
        where = exceeded.where if isinstance(exceeded, BudgetExceeded) else "an expression nested too deeply"
        files.note(
            f"cross-file analysis incomplete: the census of the tree's models ran past its budget at "
            f"{where}; which containers the tree builds was not read"
        )
        return None, None
    return census, compose(census, paths, hierarchy, uniform_bases(texts))

"""The census: which `UniformTypeKVCacheSpecs` containers a tree builds, for which model, through which
grouping path, by default or under which setting — the one answer to that question, read statically.

- kvlint.analysis.census.reading: the model registry and the layer classes (what each layer's
  `get_kv_cache_spec` builds, its backend's layouts);
- kvlint.analysis.census.instantiation: which layer classes each model's constructor builds, followed with
  `ast` through its own code, branch- and platform-aware (alternatives, not a union);
- kvlint.analysis.census.paths: the grouping code's paths and their guards;
- kvlint.analysis.census.compositions: the paths evaluated on each model's layers.
"""

from kvlint.analysis.census.compositions import DEFAULT, ContainerComposition, compose
from kvlint.analysis.census.reading import Census, LayerClass, Model, read_census
from kvlint.analysis.census.uniformity import uniform_bases
from kvlint.analysis.census_selection import could_shape_census

__all__ = [
    "DEFAULT",
    "Census",
    "ContainerComposition",
    "LayerClass",
    "Model",
    "compose",
    "could_shape_census",
    "read_census",
    "uniform_bases",
]

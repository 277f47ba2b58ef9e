"""How each phase of a cold scan grows with the vLLM tree: the index's readers and the lint, release by release.

    python benchmarks/phase_growth.py [--versions 0.27.1 0.29.0 0.31.0 0.34.0] [--runs 2]

One process per release and run (a fresh interpreter, the scan's own collector settings), `-j 1`: CPU time
(`time.process_time()`) of each reader the tree index runs (kvlint.analysis.tree_index: the census and its
compositions, the platform reach, the sizing analysis, the construction sites, everything else) and of the
per-file lint (every file of the release through the scan's own pipeline, the index built). Prints a markdown
table of the medians: the rows docs/speed.md quotes. The sources are fetched once (kvlint.scan.releases).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# Run in a child: times each reader the index build calls (patched where tree_index looks them up), then
# the whole scan. The readers' times are inclusive; "other" is the rest of the index build.
_CHILD = r"""
import functools, json, sys, time
from pathlib import Path
from kvlint.collector import tune_collector
tune_collector()
import kvlint.analysis.tree_index as tree_index
spent = {}
def timed(name):
    function = getattr(tree_index, name)
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.process_time() - started
    setattr(tree_index, name, wrapper)
for name in ("_read_compositions", "read_platform_reach", "build_sizing_analysis", "read_construction_sites",
             "build_tree_index"):
    timed(name)
from kvlint.cli import main
started = time.process_time()
try:
    main(["check", "--no-cache", "-j", "1", "-q", "--exit-zero", "--output-format", "concise", sys.argv[1]])
except SystemExit:
    pass
spent["scan"] = time.process_time() - started
print(json.dumps(spent), file=sys.stderr)
"""

_ROWS = (
    ("census (models, grouping paths, compositions)", "_read_compositions"),
    ("platform reach", "read_platform_reach"),
    ("sizing analysis", "build_sizing_analysis"),
    ("construction sites", "read_construction_sites"),
)


def measure(tree: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _CHILD, tree], capture_output=True, text=True, check=True)
    return json.loads(done.stderr.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=["0.27.1", "0.29.0", "0.31.0", "0.34.0"])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    from kvlint.scan.releases import release_sources

    columns: dict[str, dict[str, float]] = {}
    sizes: dict[str, int] = {}
    for version in args.versions:
        source = release_sources(version)
        sizes[version] = sum(1 for _ in (source / "vllm").rglob("*.py"))
        runs = [measure(str(source)) for _ in range(args.runs)]
        columns[version] = {key: statistics.median(run.get(key, 0.0) for run in runs) for key in runs[0]}
    header = f"| phase (CPU s, median of {args.runs}, `-j 1`) | " + " | ".join(
        f"{v} ({sizes[v]:,} files)" for v in args.versions
    )
    lines = [header + " |", "|---|" + "---:|" * len(args.versions)]
    for label, key in _ROWS:
        lines.append(f"| {label} | " + " | ".join(f"{columns[v].get(key, 0.0):.2f}" for v in args.versions) + " |")
    other = {
        v: columns[v]["build_tree_index"] - sum(columns[v].get(key, 0.0) for _, key in _ROWS) for v in args.versions
    }
    lines.append(
        "| rest of the index (reading the files, roles, resolver) | "
        + " | ".join(f"{other[v]:.2f}" for v in args.versions)
        + " |"
    )
    lines.append(
        "| lint (every file: triage, Python's parse, libcst where a rule needs it) | "
        + " | ".join(f"{columns[v]['scan'] - columns[v]['build_tree_index']:.2f}" for v in args.versions)
        + " |"
    )
    lines.append("| whole scan | " + " | ".join(f"{columns[v]['scan']:.2f}" for v in args.versions) + " |")
    print("\n".join(lines))
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

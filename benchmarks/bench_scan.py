"""How fast is kvlint on a whole vLLM release, next to semgrep CE and Fixit running equivalent rules and `grep -rn`?

    python benchmarks/bench_scan.py [--version 0.29.0] [--runs 3] [--fixit-runs 1] [--skip-fixit] [--skip-semgrep]

kvlint is installed from the working tree into a throwaway venv as a user installs it (`pip install .`),
and every command runs with the tree's root as its working folder. Scenarios, each on a private copy of
the release's sources (so a file can be edited and nothing is written into the release cache):

  kvlint cold        `kvlint check --no-cache`: every file read, the index built, candidates parsed
  kvlint warm        `kvlint check --cache-dir C` with a primed cache and nothing changed: the kept run is
                     replayed (kvlint.scan.replay) after a stat of what it read
  edit: other file   one module that nothing sizing-related mentions gets a new line, then a warm scan (no
                     replay: the edit is within the racy window, so this run is not kept either)
  edit: sizing file  the offloading connector's config.py gets a new first line: the project index is
                     rebuilt, the analysis' findings there move, that module is parsed again
  kvlint fix --diff  `kvlint fix --diff --no-cache`: scan + rewrite + re-lint, writes nothing
  fix --diff, repeat `kvlint fix --diff --cache-dir C` after the same command primed C
  semgrep            semgrep CE with benchmarks/semgrep/kv_rules.yml (its own venv): KV101's and KV102's patterns
  fixit              Fixit 2 with benchmarks/fixit_rules/kv101_equivalent.py only (its own venv)
  grep -rn           `grep -rnE 'isinstance\\(.*Spec'`, the text search the KV101 rule refines
  python -c pass     the interpreter kvlint runs on, starting and stopping: the floor under every kvlint row
  kvlint --version   interpreter start + kvlint's command-line imports

Times are wall clock; CPU time is user + system of the command and every process it waited for (semgrep's
engine, kvlint's workers): on a machine shared with other work it is the figure that compares, so every
table says the load average at its start and end. Peak memory is the largest resident set of any one process (wait4's ru_maxrss
covers the command and the workers it waited for) and the largest sum over the command's process tree,
sampled every 50 ms (an upper bound: forked workers share pages with their parent).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXIT_RULES = HERE / "fixit_rules"
GREP_PATTERN = r"isinstance\(.*Spec"
OTHER_FILE = "vllm/model_executor/layers/activation.py"
SIZING_FILE = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py"
FIXIT_VERSION = "fixit==2.2.1"
SEMGREP_RULES = HERE / "semgrep" / "kv_rules.yml"
SEMGREP_VERSION = "semgrep==1.187.0"
# Issue 30's targets for kvlint cold / semgrep CE, CPU time, by release (another release: the newest's).
SEMGREP_CPU_TARGETS = {"0.29.0": 0.35, "0.34.0": 0.4}


@dataclass
class Measurement:
    name: str
    command: str
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    largest_rss_kib: int = 0
    tree_rss_kib: int = 0
    exit_codes: set[int] = field(default_factory=set)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def _tree_rss_kib(root_pid: int) -> int:
    """Resident memory of a process and all its descendants, from /proc (Linux)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                fields = stream.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    family, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in family:
                family.add(child)
                frontier.append(child)
    return sum(rss.get(pid, 0) for pid in family)


def run_once(argv: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, int, int, int, float]:
    """(seconds, exit code, largest single-process RSS KiB, largest process-tree RSS KiB, CPU seconds)."""
    peak = [0]
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kib(process.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    # CPU time of the command and the workers it waited for: what the work costs, whatever else runs.
    return elapsed, process.returncode, usage.ru_maxrss, peak[0], usage.ru_utime + usage.ru_stime


def measure(
    name: str, argv: list[str], runs: int, before=None, env=None, cwd=None, shown: str | None = None
) -> Measurement:
    result = Measurement(name, shown or " ".join(argv))
    for number in range(runs):
        if before is not None:
            before(number)
        seconds, code, largest, tree, cpu = run_once(argv, env=env, cwd=cwd)
        result.times.append(seconds)
        result.cpu_times.append(cpu)
        result.exit_codes.add(code)
        result.largest_rss_kib = max(result.largest_rss_kib, largest)
        result.tree_rss_kib = max(result.tree_rss_kib, tree)
        print(f"  {name}: run {number + 1}/{runs}: {seconds:.2f} s, CPU {cpu:.2f} s (exit {code})", file=sys.stderr)
    return result


def measure_in_turn(turns: list[tuple[str, list[str], str]], runs: int) -> list[Measurement]:
    """(name, argv, shown) measured one run each in turn, `runs` rounds: a change of load hits all alike."""
    done = [Measurement(name, shown) for name, _, shown in turns]
    for _ in range(runs):
        for measurement, (name, argv, shown) in zip(done, turns):
            one = measure(name, argv, 1, shown=shown)
            measurement.times += one.times
            measurement.cpu_times += one.cpu_times
            measurement.exit_codes |= one.exit_codes
            measurement.largest_rss_kib = max(measurement.largest_rss_kib, one.largest_rss_kib)
            measurement.tree_rss_kib = max(measurement.tree_rss_kib, one.tree_rss_kib)
    return done


def fixit_python(cache: Path) -> Path:
    """A venv with Fixit, kept under the benchmark's cache folder (created on first use)."""
    venv = cache / "fixit-venv"
    python = venv / "bin" / "python"
    if not (venv / "bin" / "fixit").exists():
        print(f"bench: installing {FIXIT_VERSION} into {venv}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", FIXIT_VERSION], check=True)
    return python


def semgrep_command(cache: Path) -> Path:
    """A venv with semgrep CE, kept under the benchmark's cache folder (created on first use)."""
    venv = cache / "semgrep-venv"
    if not (venv / "bin" / "semgrep").exists():
        print(f"bench: installing {SEMGREP_VERSION} into {venv}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", SEMGREP_VERSION], check=True)
    return venv / "bin" / "semgrep"


def install_kvlint(folder: Path) -> tuple[list[str], Path]:
    """Install the working tree's kvlint, as a user would (`pip install .`: a wheel, bytecode compiled at
    install), into a fresh venv; the `kvlint` command and that venv's python."""
    venv = folder / "kvlint-venv"
    print(f"bench: installing kvlint from {HERE.parent} into {venv}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(HERE.parent)], check=True
    )
    return [str(venv / "bin" / "kvlint")], python


def append_line(path: Path, number: int) -> None:
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(f"# benchmark edit {number} at {time.time_ns()}\n")


def prepend_line(path: Path, number: int) -> None:
    """An edit that moves every line of the module: whatever the analysis says about it changes."""
    path.write_text(
        f"# benchmark edit {number} at {time.time_ns()}\n" + path.read_text(encoding="utf-8"), encoding="utf-8"
    )


def render(results: list[Measurement], args, tree_files: int, tree_lines: int) -> str:
    lines = [
        f"vLLM {args.version}: {tree_files} files, {tree_lines:,} lines; {os.cpu_count()} CPUs; "
        f"Python {sys.version.split()[0]}; load average at start {args.load_at_start}, at the end {args.load_at_end}",
        "",
        "| scenario | runs | median s | min–max s | median CPU s "
        "| peak RSS, one process MiB | peak RSS, process tree MiB | exit |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for m in results:
        lines.append(
            f"| {m.name} | {len(m.times)} | {m.median:.2f} | {min(m.times):.2f}–{max(m.times):.2f} "
            f"| {statistics.median(m.cpu_times):.2f} | {m.largest_rss_kib / 1024:.0f} | {m.tree_rss_kib / 1024:.0f} "
            f"| {','.join(map(str, sorted(m.exit_codes)))} |"
        )
    by_name = {m.name: m for m in results}
    lines += ["", "| ratio (medians) | value | target | met |", "|---|---:|---:|---|"]

    def ratio(label: str, top: str, bottom: str, target: float, below: bool = True) -> None:
        if top in by_name and bottom in by_name:
            value = by_name[top].median / by_name[bottom].median
            met = value <= target if below else value >= target
            lines.append(f"| {label} | {value:.2f} | ≤ {target:g} | {'yes' if met else 'no'} |")

    ratio("kvlint cold / fixit", "kvlint cold", "fixit", 0.1)
    if "kvlint cold" in by_name and "fixit" in by_name:
        value = statistics.median(by_name["kvlint cold"].cpu_times) / statistics.median(by_name["fixit"].cpu_times)
        lines.append(f"| kvlint cold / fixit, CPU time | {value:.2f} | ≤ 0.1 | {'yes' if value <= 0.1 else 'no'} |")
    if "kvlint cold" in by_name and "semgrep" in by_name:
        target = SEMGREP_CPU_TARGETS.get(args.version, 0.4)
        cold, semgrep = by_name["kvlint cold"], by_name["semgrep"]
        lines.append(f"| kvlint cold / semgrep, wall | {cold.median / semgrep.median:.2f} | | |")
        value = statistics.median(cold.cpu_times) / statistics.median(semgrep.cpu_times)
        lines.append(
            f"| kvlint cold / semgrep, CPU time | {value:.2f} | ≤ {target:g} | {'yes' if value <= target else 'no'} |"
        )
    ratio("kvlint warm / grep", "kvlint warm", "grep -rn", 2)
    ratio("kvlint fix --diff, repeat / kvlint warm", "kvlint fix --diff, repeat", "kvlint warm", 3)
    ratio("kvlint edit: other file / grep", "kvlint edit: other file", "grep -rn", 5)
    ratio("kvlint edit: sizing file / grep", "kvlint edit: sizing file", "grep -rn", 5)
    ratio("kvlint --version / grep", "kvlint --version", "grep -rn", 3)
    peak = max((m.tree_rss_kib for m in results if m.name.startswith("kvlint")), default=0) / 1024
    lines.append(f"| kvlint peak RSS, process tree (MiB) | {peak:.0f} | ≤ 300 | {'yes' if peak <= 300 else 'no'} |")
    lines += ["", "Commands (TREE = a private copy of the release's sources, C = a fresh cache folder):", ""]
    lines += [f"- {m.name}: `{m.command}`" for m in results]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="0.29.0", help="vLLM release to scan (fetched from PyPI once)")
    parser.add_argument("--runs", type=int, default=3, help="runs per kvlint and grep scenario")
    parser.add_argument("--fixit-runs", type=int, default=1, help="runs of fixit (minutes each)")
    parser.add_argument("--skip-fixit", action="store_true")
    parser.add_argument("--skip-semgrep", action="store_true")
    parser.add_argument(
        "--only-cold", action="store_true", help="grep, kvlint cold and semgrep only (the CPU comparison)"
    )
    parser.add_argument("--jobs", type=int, default=None, help="kvlint --jobs (default: all cores)")
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    parser.add_argument(
        "--working-tree",
        action="store_true",
        help="run kvlint from the working tree with this interpreter (default: `pip install .` of it into a fresh "
        "venv at start, so that edits made while the benchmark runs neither change what is measured nor "
        "invalidate the warm cache)",
    )
    args = parser.parse_args()
    args.load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())

    from kvlint.scan.releases import release_sources
    from kvlint.scan.storage import cache_root

    source = release_sources(args.version)
    bench_cache = cache_root() / "bench"
    fixit = None if args.skip_fixit else fixit_python(bench_cache)
    semgrep = None if args.skip_semgrep else semgrep_command(bench_cache)
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []

    with tempfile.TemporaryDirectory(prefix="kvlint-bench-") as scratch:
        kvlint, python = [sys.executable, "-m", "kvlint"], Path(sys.executable)
        if not args.working_tree:
            kvlint, python = install_kvlint(Path(scratch))
        tree = Path(scratch) / "tree"
        shutil.copytree(source / "vllm", tree / "vllm")
        cache = Path(scratch) / "cache"
        target = str(tree / "vllm")
        files = list((tree / "vllm").rglob("*.py"))
        tree_lines = sum(path.read_bytes().count(b"\n") for path in files)
        # Old mtimes, as in a checkout: files copied a moment ago are "racily clean" and always hashed.
        for path in files:
            os.utime(path, (time.time() - 3600, time.time() - 3600))
        results: list[Measurement] = []
        os.chdir(tree)  # where a maintainer runs it: the tree's root (no [tool.kvlint] there)

        def show(argv: list[str]) -> str:
            if argv[: len(kvlint)] == kvlint:
                argv = ["kvlint", *argv[len(kvlint) :]]
            return (
                " ".join(argv)
                .replace(target, "TREE/vllm")
                .replace(str(cache), "C")
                .replace(str(python), "python")
                .replace(sys.executable, "python")
            )

        check = [*kvlint, "check", *jobs]
        argv = [str(python), "-c", "pass"]
        results.append(measure("python -c pass", argv, args.runs, shown=show(argv)))
        argv = [*kvlint, "--version"]
        results.append(measure("kvlint --version", argv, args.runs, shown=show(argv)))
        argv = ["grep", "-rnE", GREP_PATTERN, target]
        results.append(
            measure("grep -rn", argv, args.runs, shown=show(argv).replace(GREP_PATTERN, f"'{GREP_PATTERN}'"))
        )
        argv = [*check, "--no-cache", target]
        turns = [("kvlint cold", argv, show(argv))]
        if semgrep is not None:
            # semgrep's own defaults otherwise: its version check and metrics off, so that nothing waits on a network
            argv = [str(semgrep), "scan", "--config", str(SEMGREP_RULES), "--metrics=off", "--disable-version-check"]
            argv += ["--quiet", "--jobs", str(args.jobs or os.cpu_count() or 1), target]
            shown = show(argv).replace(str(semgrep.parent), "VENV/bin").replace(str(HERE), "benchmarks")
            turns.append(("semgrep", argv, shown))
        results.extend(measure_in_turn(turns, args.runs))
        if not args.only_cold:
            argv = [*check, "--cache-dir", str(cache), target]
            run_once(argv)  # prime the cache (a cold scan that writes it)
            run_once(argv)  # and settle it: entries of files modified just before the first one get trusted
            results.append(measure("kvlint warm", argv, args.runs, shown=show(argv)))
            results.append(
                measure(
                    "kvlint edit: other file",
                    argv,
                    args.runs,
                    before=lambda n: append_line(tree / OTHER_FILE, n),
                    shown=show(argv) + f"  (after appending a line to {OTHER_FILE})",
                )
            )
            results.append(
                measure(
                    "kvlint edit: sizing file",
                    argv,
                    args.runs,
                    before=lambda n: prepend_line(tree / SIZING_FILE, n),
                    shown=show(argv) + f"  (after inserting a first line into {SIZING_FILE})",
                )
            )
            argv = [*kvlint, "fix", "--diff", "--no-cache", *jobs, target]
            results.append(measure("kvlint fix --diff", argv, args.runs, shown=show(argv)))
            argv = [*kvlint, "fix", "--diff", "--cache-dir", str(cache), *jobs, target]
            run_once(argv)  # the first fix of this tree fills the cache with what it re-lints
            results.append(measure("kvlint fix --diff, repeat", argv, args.runs, shown=show(argv)))
        if fixit is not None and not args.only_cold:
            (tree / ".fixit.toml").write_text(
                '[tool.fixit]\nroot = true\ndisable = ["fixit.rules"]\nenable = ["kv101_equivalent"]\n'
            )
            env = {**os.environ, "PYTHONPATH": str(FIXIT_RULES)}
            argv = [str(fixit.parent / "fixit"), "lint", target]
            results.append(
                measure(
                    "fixit",
                    argv,
                    args.fixit_runs,
                    env=env,
                    shown=(
                        f"PYTHONPATH=benchmarks/fixit_rules {show(argv).replace(str(fixit.parent), 'VENV/bin')}"
                        "  (TREE/.fixit.toml enables only kv101_equivalent)"
                    ),
                )
            )

        os.chdir(HERE)
    args.load_at_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    table = render(results, args, len(files), tree_lines)
    print(table)
    if args.output is not None:
        args.output.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

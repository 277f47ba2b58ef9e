"""`kvlint verify`: prove at runtime that every sizing path computes the same span, or (with
--upstream-tests) that vLLM's own tests pass on the tree `kvlint fix` rewrote as they did before.

The vLLM tree is imported only in a child interpreter (child.py, pytest_child.py, run with ``-I``), never
in kvlint's own process. Exit codes: 0 every cell agrees (no test got worse), 1 some cell disagrees (some
test that passed fails, or a test module no longer collects), 2 the tree cannot be imported or the
harness failed (one line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kvlint.engine.summary import EXIT_ERROR
from kvlint.errors import VerifyError
from kvlint.verify.matrix import render_json, render_text
from kvlint.verify.run import DEFAULT_TIMEOUT_S, ChildRun, package_parent, run_child

RENDERERS = {"text": render_text, "json": render_json}


@click.command("verify")
@click.option(
    "--vllm",
    "vllm_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The vllm package folder, or the folder that holds it (put on sys.path). Default: the installed vllm.",
)
@click.option(
    "--vllm-release",
    "release",
    metavar="VERSION",
    help="Use this vLLM release's sources (and, with --upstream-tests, its tests) from PyPI's sdist.",
)
@click.option(
    "--upstream-tests",
    is_flag=True,
    help="Run vLLM's own tests of the modules `kvlint fix` changes, on the tree and on a fixed copy of it.",
)
@click.option(
    "--tests",
    "tests_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --upstream-tests: vLLM's tests/ folder, or the folder that holds it. "
    "Default: the release's, or the one beside --vllm's package.",
)
@click.option(
    "--unsafe-fixes",
    "unsafe",
    is_flag=True,
    help="With --upstream-tests: the fixed copy takes the unsafe fixes too, as `kvlint fix --unsafe-fixes`.",
)
@click.option(
    "--test-module",
    "test_modules",
    multiple=True,
    metavar="PATH",
    help="With --upstream-tests: run only this test module (repeatable; relative to the tests' root, "
    "e.g. tests/v1/test_x.py) of those that import a changed module.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="KVLINT_CACHE_DIR",
    help="Cache folder that holds fetched releases (default: ~/.cache/kvlint).",
)
@click.option(
    "--python",
    "python",
    default=None,
    help="Interpreter that imports the vLLM tree (it needs torch and vLLM's requirements). Default: the "
    "runtime `kvlint verify --setup` built, else this interpreter.",
)
@click.option(
    "--setup",
    is_flag=True,
    help="Build the runtime verify needs (torch, see --torch-index-url; vLLM 0.29.0 and the requirements its sizing "
    "modules import; about 2.1 GB with torch's CPU build, under ~/.cache/kvlint-tests, shared with kvlint's test "
    "suite), then exit. The source of torch is said in one line before the build.",
)
@click.option(
    "--torch-index-url",
    metavar="URL",
    default=None,
    help="With --setup: the package index torch is installed from (PyTorch's CPU build: "
    "https://download.pytorch.org/whl/cpu). Default: KVLINT_TORCH_WHEEL's wheel file, else torch as pip resolves "
    "it with your pip configuration (PIP_INDEX_URL, pip.conf; PyPI's default build otherwise).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(sorted(RENDERERS)),
    default="text",
    show_default=True,
)
@click.option(
    "--dcp",
    "dcp_sizes",
    type=click.IntRange(min=1),
    multiple=True,
    help="DCP size to check (repeatable). Default: 1, 2, 4, 8.",
)
@click.option(
    "--rewrites",
    "rewrites_of",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Evaluate every container-blind check `kvlint fix` rewrites in this tree in the vLLM imported, on plain "
    "specs of every class and a container of every composition the tree can build; print the table.",
)
@click.option(
    "--census",
    is_flag=True,
    help="Group every model of the census with the tree's own get_kv_cache_groups in the vLLM imported, and "
    "compare the containers it builds with the census's default compositions; print the table.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds the child may run (with --upstream-tests: each of its two pytest runs).",
)
def verify(
    vllm_path: Path | None,
    release: str | None,
    upstream_tests: bool,
    tests_path: Path | None,
    test_modules: tuple[str, ...],
    unsafe: bool,
    cache_dir: Path | None,
    python: str | None,
    setup: bool,
    torch_index_url: str | None,
    output_format: str,
    dcp_sizes: tuple[int, ...],
    rewrites_of: Path | None,
    census: bool,
    timeout_s: float,
) -> None:
    """Check at runtime that scheduler, managers and connectors agree on each block's span.

    Imports the vLLM tree in a child interpreter, builds KV cache configurations for
    every group kind x DCP size, and prints each sizing path's token span per block.
    Exit 0 when every cell agrees, 1 when any disagrees, 2 when the tree cannot be
    imported.

    With --upstream-tests: copies the tree, applies `kvlint fix` to the copy, finds vLLM's test modules
    that import a module the fix changed (read, never imported), runs them with pytest against the
    original and against the copy, and lists every test whose outcome changed and every test module
    that could not be collected. Without a CUDA device vLLM runs on its CPU platform and tests that
    need a GPU skip with their own reasons.

    With --census: for every model of the tree's census, groups the layers the census says it builds with
    the tree's own get_kv_cache_groups and lists the models whose containers differ from the census's.
    Exit 0 when every model compared agrees, 1 when any differs.
    """
    if torch_index_url is not None and not setup:
        raise click.UsageError("--torch-index-url goes with --setup")
    if setup:
        try:
            _setup(torch_index_url)
        except VerifyError as error:
            click.echo(f"kvlint: error: {error}", err=True)
            click.get_current_context().exit(EXIT_ERROR)
        return
    python = python or _default_python()
    if vllm_path is not None and release:
        raise click.UsageError("give either --vllm or --vllm-release, not both")
    if (tests_path is not None or test_modules or unsafe) and not upstream_tests:
        raise click.UsageError("--tests, --test-module and --unsafe-fixes go with --upstream-tests")
    if census and (upstream_tests or rewrites_of is not None or dcp_sizes):
        raise click.UsageError("--census goes alone: not with --upstream-tests, --rewrites or --dcp")
    try:
        tree = _tree(vllm_path, release, cache_dir)
        if upstream_tests:
            if dcp_sizes:
                raise click.UsageError("--dcp is for the sizing matrix, not --upstream-tests")
            tests_root = _tests_root(tests_path, tree, release, cache_dir)
            _upstream(tree, tests_root, test_modules, python, output_format, timeout_s, unsafe)
        run = ChildRun(python=python, vllm_path=tree, dcp_sizes=dcp_sizes, timeout_s=timeout_s)
        if rewrites_of is not None:
            _rewrites(run, rewrites_of)
        if census:
            _census(run, output_format)
        report = run_child(run)
    except VerifyError as error:  # said here too: the command also runs outside the click group (tests)
        click.echo(f"kvlint: error: {error}{_next_step(str(error))}", err=True)
        click.get_current_context().exit(EXIT_ERROR)
    click.echo(RENDERERS[output_format](report))
    if not report.compared:
        click.echo(f"kvlint: no cell could be compared in vLLM {report.vllm_version}", err=True)
    click.get_current_context().exit(report.exit_code)


def _default_python() -> str:
    """The runtime `--setup` built, when it is there; else this interpreter."""
    from kvlint.verify.runtime_env import built_runtime

    built = built_runtime()
    return str(built) if built is not None else sys.executable


def _next_step(message: str) -> str:
    """What to do about a child that cannot import vLLM for want of a module (torch, most often)."""
    if "No module named" not in message:
        return ""
    from kvlint.verify.runtime_env import cache_root, environment_key

    return (
        f"; run `kvlint verify --setup` to build the CPU runtime it needs (about 2.1 GB, in "
        f"{cache_root() / environment_key()}), or give --python an interpreter with torch and vLLM's requirements"
    )


def _setup(torch_index_url: str | None = None) -> None:
    """Build the runtime (or find it built) and say where it is and how large."""
    from kvlint.verify.runtime_env import RuntimeUnavailable, size_on_disk, vllm_runtime

    try:
        runtime = vllm_runtime(
            progress=lambda message: click.echo(f"kvlint: {message}", err=True), torch_index_url=torch_index_url
        )
    except (RuntimeUnavailable, RuntimeError, OSError) as error:
        raise VerifyError(f"cannot build the verify runtime: {error}") from None
    state = f"built now in {runtime.build_seconds:.0f} s" if runtime.built_now else "already built"
    size = size_on_disk(runtime.root) / 2**30
    click.echo(f"kvlint: the verify runtime is ready ({state}; {size:.1f} GiB): {runtime.python}", err=True)


def _rewrites(run: ChildRun, tree: Path) -> None:
    import json
    import tempfile

    from kvlint.scan.config import find_pyproject, load_config
    from kvlint.verify.checks import cases_document, collect_cases, render_checks
    from kvlint.verify.run import run_child_raw

    cases, compositions, _ = collect_cases(tree.resolve(), load_config(find_pyproject(Path.cwd())))
    with tempfile.TemporaryDirectory(prefix="kvlint-checks-") as scratch:
        document = Path(scratch) / "checks.json"
        document.write_text(json.dumps(cases_document(cases, compositions)), encoding="utf-8")
        raw = run_child_raw(run, ["--checks", str(document)])
    table, every_ok = render_checks(cases, raw)
    click.echo(table)
    click.get_current_context().exit(0 if every_ok else 1)


def _census(run: ChildRun, output_format: str) -> None:
    import json
    import tempfile

    from kvlint.scan.index_cache import build_project_index
    from kvlint.verify.census_cases import census_cases
    from kvlint.verify.census_oracle import CENSUS_CHILD, CensusResultError, cases_document, compare, installed_vllm
    from kvlint.verify.census_oracle import render_json as census_json
    from kvlint.verify.census_oracle import render_text as census_text
    from kvlint.verify.run import run_child_raw

    root = run.vllm_path if run.vllm_path is not None else installed_vllm(run.python)
    index = build_project_index([root / "vllm"])
    if index.census is None:
        raise VerifyError(f"{root / 'vllm'}: no model registry found: the tree's models cannot be read")
    cases = census_cases(index)
    with tempfile.TemporaryDirectory(prefix="kvlint-census-") as scratch:
        document = Path(scratch) / "cases.json"
        document.write_text(json.dumps(cases_document(cases)), encoding="utf-8")
        raw = run_child_raw(
            ChildRun(run.python, root, timeout_s=run.timeout_s), ["--cases", str(document)], CENSUS_CHILD
        )
    try:
        report = compare(cases, raw, index.census.unread)
    except CensusResultError as error:
        raise VerifyError(str(error)) from None
    click.echo((census_json if output_format == "json" else census_text)(report))
    if not report.compared:
        click.echo(f"kvlint: no model could be compared in vLLM {report.vllm_version}", err=True)
    click.get_current_context().exit(report.exit_code)


def _tree(vllm_path: Path | None, release: str | None, cache_dir: Path | None) -> Path | None:
    """The folder to put on sys.path: --vllm as given (the package folder or its parent), the release's."""
    if release:
        from kvlint.scan.releases import release_sources  # index and archive handling: only when fetching

        return release_sources(release, cache_dir=cache_dir)
    return package_parent(vllm_path) if vllm_path is not None else None


def _tests_root(tests_path: Path | None, tree: Path | None, release: str | None, cache_dir: Path | None) -> Path:
    """The folder that holds vLLM's tests/ (pytest's rootdir)."""
    if tests_path is not None:
        if tests_path.name == "tests" and tests_path.is_dir() and not (tests_path / "tests").is_dir():
            return tests_path.parent
        if (tests_path / "tests").is_dir():
            return tests_path
        raise VerifyError(f"{tests_path}: holds no tests/ folder")
    if release:
        from kvlint.scan.releases import release_tests

        return release_tests(release, cache_dir=cache_dir)
    if tree is None:
        raise click.UsageError("--upstream-tests needs the tree: give --vllm PATH or --vllm-release VERSION")
    if (tree / "tests").is_dir():
        return tree  # a vLLM checkout: tests/ beside vllm/
    raise VerifyError(f"no tests/ folder beside {tree / 'vllm'}: give --tests PATH")


def _upstream(
    tree: Path | None,
    tests_root: Path,
    only: tuple[str, ...],
    python: str,
    output_format: str,
    timeout_s: float,
    unsafe: bool = False,
) -> None:
    from kvlint.scan.config import find_pyproject, load_config
    from kvlint.verify.upstream import run_upstream_tests
    from kvlint.verify.upstream_report import render_json, render_text

    if tree is None:
        raise click.UsageError("--upstream-tests needs the tree: give --vllm PATH or --vllm-release VERSION")
    config = load_config(find_pyproject(Path.cwd()))  # as `kvlint fix` reads it
    report = run_upstream_tests(tree, tests_root, python, timeout_s, config, only, unsafe=unsafe)
    click.echo((render_json if output_format == "json" else render_text)(report), nl=output_format == "json")
    click.get_current_context().exit(report.exit_code)


if __name__ == "__main__":
    verify()

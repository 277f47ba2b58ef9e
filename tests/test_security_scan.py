"""`check` and `fix` on a hostile tree and a hostile cache folder (issue 12: High 2, Medium 3 and 7, the Lows
of the scan and of `fix`): each test rebuilds one attack and fails on the code before the fix.

Small trees in tmp_path, real symbolic links, FIFOs (os.mkfifo) and hard links; every command that could
hang or read without end runs in a child process with a deadline and a memory cap.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint_runner import run_kvlint_child
from test_semantics import (
    CONNECTOR_029,
    INDEXER,
    INTERFACE_029,
    KV_CACHE_UTILS,
    OFFLOADING_CONFIG,
    RESOLVER_029,
)
from test_text_layout import located

ROOT = Path(__file__).resolve().parent.parent
SIZING = ("KV103", "KV104", "KV105")
# What the fixture tree reports: the sizing analysis' three rules and the per-file ones, two of them fixable.
EXPECTED_CODES = ["KV101", "KV102", "KV103", "KV104", "KV105", "KV105"]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Each test has its own cache folder and its own cache key (never the user's)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("KVLINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


@pytest.fixture
def tree(tmp_path) -> Path:
    """A miniature vLLM tree whose check reports KV101–KV105 (the cross-file sizing analysis finds three)."""
    root = tmp_path / "tree"
    files = {
        "vllm/v1/kv_cache_interface.py": INTERFACE_029,
        KV_CACHE_UTILS: RESOLVER_029,
        OFFLOADING_CONFIG: CONNECTOR_029,
        "vllm/model_executor/models/deepseek_v2.py": INDEXER,
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    past = os.stat(root).st_mtime - 3600  # older than the cache's racy window: its stat is trusted
    for path in root.rglob("*.py"):
        os.utime(path, (past, past))
    return root


def kvlint(*args: str, cwd: Path, timeout: float = 60, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    """Run kvlint in a child process; a hang is a failure (the child and its workers are killed)."""
    return run_kvlint_child(*args, cwd=cwd, timeout=timeout, stdin=stdin)


def cli(monkeypatch, tree: Path, *args: str):
    """Run kvlint in this process, from the tree's folder (for commands that cannot hang)."""
    monkeypatch.chdir(tree)
    return CliRunner().invoke(main, list(args))


def codes(result) -> list[str]:
    """Every finding's code, those folded into a root cause as related locations too."""
    found = json.loads(result.stdout)
    return sorted([f["code"] for f in found] + [r["code"] for f in found for r in f.get("related", ())])


def check_json(tree: Path, *more: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return kvlint("check", "--jobs", "1", "--format", "json", *more, "vllm", cwd=tree, timeout=timeout)


# ------------------------------------------------------------------------------ the result cache (High 2)


class Planted:
    """A pickle that, if it is ever loaded, writes a file: proof that a cache file ran code."""

    def __init__(self, proof: Path):
        self.proof = proof

    def __reduce__(self):
        return (Path.write_text, (self.proof, "code ran"))


def test_a_planted_pickle_named_like_any_cache_file_runs_nothing(tree, tmp_path, monkeypatch):
    def check_json(tree):
        return cli(monkeypatch, tree, "check", "--jobs", "1", "--format", "json", "vllm")

    expected = check_json(tree)
    cache = tmp_path / "cache" / "results"
    cached = sorted(cache.iterdir())
    assert cached, "the first check wrote its caches"
    proof = tmp_path / "proof"
    for path in cached:  # whatever the caches are named, each is replaced by a payload
        path.write_bytes(pickle.dumps({"format": 3, "entries": Planted(proof), "triggers": None}))
    again = check_json(tree)
    assert not proof.exists(), "a cache file ran code"
    assert (again.exit_code, codes(again)) == (expected.exit_code, codes(expected)) == (1, EXPECTED_CODES)


def _forge(path: Path, cleared) -> None:
    """Rewrite a cache file as an attacker would: same layout, every result "clean", a signature of its own."""
    data = path.read_bytes()
    if not data.startswith(b"kvlint-cache "):  # the pickle manifests issue 12 forged
        stored = pickle.loads(data)
        stored["entries"] = {name: (None, entry[1], *entry[2:4], None) for name, entry in stored["entries"].items()}
        path.write_bytes(pickle.dumps(stored))
        return
    header, _, document = data.partition(b"\n")
    stored = json.loads(document)
    cleared(stored)
    from kvlint.scan.signing import sign

    forged = json.dumps(stored).encode()
    attacker_key = b"\x01" * 32
    signature = sign(attacker_key, b"manifest", path.stem.removeprefix("manifest-").encode(), forged)
    path.write_bytes(b" ".join(header.split(b" ")[:2]) + b" " + signature.encode() + b"\n" + forged)


def test_a_forged_manifest_claiming_every_file_clean_hides_nothing(tree, tmp_path, monkeypatch):
    """The forged entries name each file's real content digest and scope: only the signature is wrong."""

    def check_json(tree):
        return cli(monkeypatch, tree, "check", "--jobs", "1", "--format", "json", "vllm")

    check_json(tree)
    cache = tmp_path / "cache" / "results"

    def cleared(stored: dict) -> None:
        for entry in stored["entries"].values():
            entry[0], entry[4] = None, None  # no stat (the digest decides), no findings

    for manifest in cache.glob("manifest-*"):
        _forge(manifest, cleared)
    for path in (tree / "vllm").rglob("*.py"):  # a fresh checkout: every inode and mtime changes
        path.write_bytes(path.read_bytes())
    again = check_json(tree)
    assert (again.exit_code, codes(again)) == (1, EXPECTED_CODES)


def test_a_signed_record_is_bound_to_its_kind_and_configuration(tree, tmp_path, monkeypatch):
    """A record kvlint itself wrote for one configuration is "not cached" under another's name."""
    from kvlint.scan.storage import load_record

    cli(monkeypatch, tree, "check", "--jobs", "1", "--select", "KV101", "vllm")
    cli(monkeypatch, tree, "check", "--jobs", "1", "--select", "KV102", "vllm")
    cache = tmp_path / "cache" / "results"
    first, second = sorted(cache.glob("manifest-*"))
    assert load_record(first, "manifest", first.stem.removeprefix("manifest-")) is not None
    assert load_record(first, "manifest", second.stem.removeprefix("manifest-")) is None
    assert load_record(first, "snapshot", first.stem.removeprefix("manifest-")) is None


def test_a_cache_key_others_can_read_is_not_used(tree, tmp_path, monkeypatch):
    from kvlint.scan import signing
    from kvlint.scan.signing import cache_key, key_path

    assert cache_key() is not None and key_path().stat().st_mode & 0o777 == 0o600
    assert key_path().is_relative_to(tmp_path / "state") and not key_path().is_relative_to(tmp_path / "cache")
    key_path().chmod(0o644)
    signing._cache_key.cache_clear()  # a process reads its key once; the next one reads it again
    cache = tmp_path / "cache" / "results"
    result = cli(monkeypatch, tree, "check", "--jobs", "1", "--format", "json", "vllm")
    assert codes(result) == EXPECTED_CODES
    assert not list(cache.glob("manifest-*")), "no cache is written without a secret key"


def test_a_fifo_named_like_a_cache_file_does_not_hang(tree, tmp_path):
    expected = check_json(tree)
    cache = tmp_path / "cache" / "results"
    for path in list(cache.iterdir()):
        path.unlink()
        os.mkfifo(path)
    again = check_json(tree, timeout=60)
    assert (again.returncode, codes(again)) == (expected.returncode, codes(expected))


def test_a_link_planted_at_a_cache_file_name_is_replaced_not_written_through(tree, tmp_path, monkeypatch):
    cli(monkeypatch, tree, "check", "--jobs", "1", "vllm")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    cache = tmp_path / "cache" / "results"
    planted = sorted(cache.iterdir())
    for path in planted:
        path.unlink()
        path.symlink_to(victim)
    again = cli(monkeypatch, tree, "check", "--jobs", "1", "vllm")
    assert again.exit_code == 1 and victim.read_text() == "precious\n"
    assert all(path.is_file() and not path.is_symlink() for path in planted), "rewritten as kvlint's own files"
    assert all(path.stat().st_mode & 0o077 == 0 for path in planted)


def test_the_index_is_stored_as_checked_data(tree):
    """The tree index (hierarchy, sizing analysis, container reachability) round-trips through the
    data-only codec; anything that is not exactly what it writes is refused."""
    from kvlint.analysis.tree_index import build_tree_index
    from kvlint.scan.cache_codec import CodecError, index_from_data, index_to_data

    index = build_tree_index(tree)
    assert index.sizing is not None and index.sizing.divergences and index.containers is not None
    data = index_to_data(index)
    assert index_from_data(json.loads(json.dumps(data))) == index
    for damaged in (
        {**data, "root": 1},
        {**data, "$": "Finding"},
        {**data, "extra": None},
        {key: value for key, value in data.items() if key != "hierarchy"},
        {**data, "resolver_reads_dcp_sharded": 1},  # an int is no bool
        {**data, "sizing": {**data["sizing"], "divergences": [{"$": "Planted"}]}},
        [data],
    ):
        with pytest.raises(CodecError):
            index_from_data(damaged)


def test_a_result_with_every_field_set_round_trips():
    """Every field of a file's result, its findings and their fixes is stored and checked (a field the
    codec could not store would leave every result holding it uncached: this test says so first)."""
    from kvlint.scan.cache_codec import CodecError, result_from_data, result_to_data
    from kvlint.types import Applicability, FileResult, Finding, Fix, ImportChange, Severity, TextEdit

    fix = Fix("title", Applicability.UNSAFE, (TextEdit(0, 1, "x", 1, 1, 1, 2),), (ImportChange("m", "n", False),))
    finding = Finding("a.py", 1, 2, 3, 4, "KV101", "name", "message", Severity.WARNING, fix, "no resolver here")
    result = FileResult("a.py", (finding,), parsed=False, skipped_by_prefilter=True, suppressed=2, detail="trace")
    data = result_to_data(result)
    assert result_from_data(json.loads(json.dumps(data))) == result
    wrong_severity = {**data, "findings": [{**data["findings"][0], "severity": "fatal"}]}
    for damaged in (wrong_severity, {**data, "suppressed": "2"}, {**data, "findings": {}}):
        with pytest.raises(CodecError):
            result_from_data(damaged)


# --------------------------------------------------------------------- reading the tree (Medium 3 and 7)


def test_a_link_to_dev_zero_neither_hangs_nor_hides_cross_file_findings(tree):
    os.symlink("/dev/zero", tree / "vllm" / "v1" / "zero.py")
    for extra in (("--no-cache",), ()):  # the cache's own walk of the tree reads it too
        result = check_json(tree, *extra, timeout=90)
        assert [c for c in codes(result) if c in SIZING] == ["KV103", "KV104", "KV105", "KV105"]
        assert "symbolic link to a file outside the scanned folder: not read" in result.stdout


def test_fifos_in_the_tree_and_on_the_command_line_never_block(tree):
    os.mkfifo(tree / "vllm" / "v1" / "pipe.py")
    result = check_json(tree, timeout=60)
    assert "not a regular file (FIFO)" in result.stdout
    assert [c for c in codes(result) if c != "KV000"] == EXPECTED_CODES
    fixed = kvlint("fix", "--jobs", "1", "--diff", "vllm", cwd=tree, timeout=60)
    assert "KV000" in fixed.stderr and fixed.returncode == 1, fixed.stderr  # --diff: findings on stderr
    # /dev/stdin (a pipe that nobody writes to or closes) named on the command line: an error, not a wait.
    reader, writer = os.pipe()
    try:
        named = kvlint("check", "/dev/stdin", cwd=tree, timeout=60, stdin=reader)
    finally:
        os.close(reader)
        os.close(writer)
    assert named.returncode == 2 and "not a regular file or folder (FIFO)" in named.stderr
    assert "internal error" not in named.stderr


def test_a_fifo_swapped_in_after_the_walk_is_refused_not_waited_on(tmp_path):
    """The runner's read itself never blocks (a file replaced by a FIFO between the walk and the read)."""
    fifo = tmp_path / "swapped.py"
    os.mkfifo(fifo)
    script = (
        "from kvlint.scan.runner import read_source\n"
        f"result = read_source({str(fifo)!r}, 'swapped.py')\n"
        "print(result.findings[0].message)\n"
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert child.stdout.strip() == "cannot analyse this file: cannot read: not a regular file (FIFO)"


def test_folder_links_out_of_the_tree_are_never_walked(tree, tmp_path):
    vllm = tree / "vllm"
    os.symlink("/", vllm / "everything")
    os.symlink(sysconfig.get_paths()["stdlib"], vllm / "stdlib")
    os.symlink(tree / "vllm" / "v1", vllm / "v1_again")  # inside the tree: walked, each file once
    outside = tmp_path / "secret.py"
    outside.write_text("x = 1\n")
    os.symlink(outside, vllm / "secret.py")
    result = check_json(tree, "--no-cache", timeout=60)
    findings = json.loads(result.stdout)
    assert codes(result) == ["KV000"] * 3 + EXPECTED_CODES, "no file outside the tree, none twice"
    said = {(f["path"], f["message"]) for f in findings if f["code"] == "KV000"}
    assert said == {
        (
            "vllm/everything",
            "cannot analyse this file: symbolic link to a folder outside the scanned folder: not followed",
        ),
        ("vllm/stdlib", "cannot analyse this file: symbolic link to a folder outside the scanned folder: not followed"),
        ("vllm/secret.py", "cannot analyse this file: symbolic link to a file outside the scanned folder: not read"),
    }


def test_a_failed_cross_file_analysis_is_said_and_exits_2(tree, monkeypatch):
    from kvlint.analysis.sizing import matrix

    def fails(program):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(matrix, "analyse_program", fails)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--jobs", "1", str(tree / "vllm")])
    assert result.exit_code == 2
    assert (
        "kvlint: error: cross-file analysis incomplete: the sizing analysis failed "
        "(RecursionError: maximum recursion depth exceeded)"
    ) in result.stderr.splitlines()
    assert "KV101" in result.stdout, "the per-file rules still ran"


def test_a_file_the_cross_file_analysis_cannot_read_is_said(tree):
    huge = tree / "vllm" / "v1" / "huge.py"
    with open(huge, "wb") as stream:  # sparse: 64 GiB on paper, nothing on disk; read whole, it never ends
        stream.truncate(64 * 1024**3)
    result = check_json(tree, "--no-cache", timeout=60)
    assert result.returncode == 2
    assert (
        "kvlint: error: cross-file analysis incomplete: vllm/v1/huge.py not read: too large (65536.0 MiB > 10 MiB)"
        in (result.stderr.splitlines())
    )
    findings = json.loads(result.stdout)
    assert [f["message"] for f in findings if f["path"].endswith("huge.py")] == [
        "cannot analyse this file: too large (65536.0 MiB > 10 MiB)"
    ]


def test_an_interface_linked_out_of_the_tree_is_said(tree, tmp_path):
    """The index reads its named files (the interface, the resolver's home) like the walk: not through a link
    out of the tree; that it could not is a failure the scan says, not a silent built-in hierarchy."""
    from kvlint.analysis.tree_index import build_tree_index

    interface = tree / "vllm" / "v1" / "kv_cache_interface.py"
    elsewhere = tmp_path / "kv_cache_interface.py"
    interface.rename(elsewhere)
    interface.symlink_to(elsewhere)
    assert build_tree_index(tree).failures == (
        "cross-file analysis incomplete: vllm/v1/kv_cache_interface.py not read: a symbolic link out of the tree",
    )


# --------------------------------------------------------------------------------------- writing (`fix`)


def test_fix_never_writes_through_a_link(tree, monkeypatch):
    config = tree / OFFLOADING_CONFIG
    original = config.read_bytes()
    link = tree / "vllm" / "a_linked_config.py"  # fixed before its target (files are fixed in path order)
    os.symlink(config, link)
    result = cli(monkeypatch, tree, "fix", "--jobs", "1", "--no-cache", "vllm")
    assert link.is_symlink() and os.readlink(link) == str(config), "the link is still a link"
    assert (
        "vllm/a_linked_config.py: not fixed: is a symbolic link: not written (kvlint never writes through a link)"
        in (result.stderr.splitlines())
    )
    assert config.read_bytes() != original, "the target, scanned as itself, is fixed"
    assert config.read_bytes().count(b"resolve_dcp_kv_block_size(") == original.count(b"resolve_dcp_kv_block_size(") + 1


def test_fix_keeps_hard_links_owner_and_mode(tree, monkeypatch):
    config = tree / OFFLOADING_CONFIG
    original = config.read_bytes()
    twin = tree / "elsewhere.py"
    os.link(config, twin)
    result = cli(monkeypatch, tree, "fix", "--jobs", "1", "--no-cache", "vllm")
    assert f"{OFFLOADING_CONFIG}: not fixed: has 2 hard links" in result.stderr
    assert config.read_bytes() == twin.read_bytes() == original and os.path.samefile(config, twin)

    twin.unlink()
    config.chmod(0o640)
    if os.geteuid() == 0:  # only root can give a file away; the fix must give the new file back
        with contextlib.suppress(OSError):  # root in a user namespace (CI without network) maps no other id
            os.chown(config, 4242, 4343)
    before = config.stat()
    result = cli(monkeypatch, tree, "fix", "--jobs", "1", "--no-cache", "vllm")
    after = config.stat()
    assert config.read_bytes() != original, result.stderr
    assert (after.st_uid, after.st_gid, after.st_mode) == (before.st_uid, before.st_gid, before.st_mode)


# --------------------------------------------------------------------------------------------------- lows


def test_a_missing_path_is_an_error_not_a_finding(tree):
    result = CliRunner().invoke(main, ["check", "--no-cache", str(tree / "nonexistent")])
    assert result.exit_code == 2
    assert result.stderr == f"kvlint: error: {tree / 'nonexistent'}: no such file or directory\n"


def test_a_non_utf8_name_and_an_over_long_name_are_one_line(tree, monkeypatch):
    folder = os.fsencode(tree / "vllm")
    odd = os.path.join(folder, b"caf\xe9.py")
    with open(odd, "wb") as stream:
        stream.write(textwrap.dedent(CONNECTOR_029).lstrip("\n").encode())  # findings that name the file
    text = cli(monkeypatch, tree, "check", "--jobs", "1", "--no-cache", "vllm")
    assert "vllm/caf\\xe9.py:4:9 KV102" in located(text.stdout) and text.exit_code == 1
    assert "internal error" not in text.stderr
    as_json = cli(monkeypatch, tree, "check", "--jobs", "1", "--no-cache", "--format", "json", "vllm")
    assert any(f["path"] == "vllm/caf\udce9.py" for f in json.loads(as_json.stdout))
    named = cli(monkeypatch, tree, "check", "--no-cache", os.fsdecode(odd))
    assert named.exit_code == 1 and "internal error" not in named.stderr
    assert any(f.endswith("caf\\xe9.py:4:9 KV102") for f in located(named.stdout))

    too_long = cli(monkeypatch, tree, "check", "--no-cache", "vllm/" + "a" * 256 + ".py")
    assert too_long.exit_code == 2
    assert too_long.stderr.splitlines() == [f"kvlint: error: vllm/{'a' * 256}.py: cannot read: File name too long"]


def test_file_names_with_newlines_cannot_inject_lines(tree, monkeypatch):
    name = "x\n::error file=a.py,line=1::pwned\n\x1b[2J.py"
    (tree / "vllm" / name).write_text(textwrap.dedent(CONNECTOR_029).lstrip("\n"))
    for output_format in ("text", "github"):
        result = cli(monkeypatch, tree, "check", "--jobs", "1", "--no-cache", "--format", output_format, "vllm")
        lines = result.stdout.splitlines()
        assert not any(line.startswith("::error file=a.py") for line in lines)
        assert "\x1b" not in result.stdout + result.stderr
        # the line naming the file (a finding; its related locations in the same file say only their line)
        # holds it escaped
        odd = [line for line in lines if "pwned" in line]
        assert len(odd) == 1 and all(
            "x\\n::error file=a.py" in line or "x\\n%3A%3Aerror file=a.py" in line for line in odd
        )
    fixed = cli(monkeypatch, tree, "fix", "--jobs", "1", "--no-cache", "vllm")
    assert "x\\n::error file=a.py,line=1::pwned\\n\\x1b[2J.py: fixed 1 finding(s)" in fixed.stderr
    assert not any(line.startswith("::error") for line in fixed.stdout.splitlines() + fixed.stderr.splitlines())
    assert "\x1b" not in fixed.stdout + fixed.stderr


def test_a_configuration_that_excludes_everything_says_so(tree, monkeypatch):
    (tree / "pyproject.toml").write_text('[tool.kvlint]\nexclude = ["*.py"]\n')
    result = cli(monkeypatch, tree, "check", "--no-cache", "vllm")
    assert result.exit_code == 0
    assert (
        f"kvlint: 4 file(s) excluded by the configuration's `exclude` ({tree / 'pyproject.toml'}): nothing checked"
        in result.stderr.splitlines()
    )

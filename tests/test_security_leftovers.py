"""The last items of issue 12: `review` reads a pull request's files only through kvlint's one reader (and a
blob from git only after its size), `paths` says a cross-file analysis that failed (exit 2, as `check`
does) and `review` lists the files it could not read, and `fix` keeps a file's extended attributes and ACLs.

Real git repositories (tests/review_repos.py), real symbolic links, FIFOs and extended attributes; every
command that could hang or read without end (a link to /dev/zero, a FIFO) runs in a child process with a
deadline and a memory cap, the rest in-process (tests/kvlint_runner.py).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.errors import FixError
from kvlint.fixing.write import write_atomically
from kvlint_runner import run_kvlint, run_kvlint_child
from review_repos import commit_file, git, make_repo
from test_cli import BUGGY, make_tree

RESOLVER_HOME = "vllm/v1/core/kv_cache_utils.py"
DEADLINE_S = 60
TWENTY_MIB = b"x = 1\n" * (20 * 1024 * 1024 // 6 + 1)


def kvlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """kvlint in a child process with a memory cap; one that outlives DEADLINE_S fails the test (killed)."""
    return run_kvlint_child(*args, cwd=cwd, timeout=DEADLINE_S)


def review(repo: Path, *extra: str, head: str | None = "pr") -> subprocess.CompletedProcess:
    """`--head` reads git's blobs into a scratch tree (no link, no FIFO can be there): in-process. Without it
    the review reads the checkout, where a link to /dev/zero or a FIFO is: a child with a deadline."""
    arguments = ("review", "--base", "main", *(["--head", head] if head else []), "--jobs", "1", *extra)
    return run_kvlint(*arguments, cwd=repo) if head else kvlint(*arguments, cwd=repo)


def body(run: subprocess.CompletedProcess) -> str:
    return json.loads(run.stdout)["body"]


# ------------------------------------------------------------------- reading a pull request's files (review)


def test_a_huge_file_and_a_link_to_dev_zero_in_the_pull_request_are_skipped_with_a_reason(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "vllm" / "big.py").write_bytes(TWENTY_MIB)
    os.symlink("/dev/zero", repo / "vllm" / "zero.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr: a huge module and a link to /dev/zero")
    for head in ("pr", None):  # the head commit read from git; the checkout read from disk
        run = review(repo, head=head)
        said = run.stderr.splitlines()
        assert "kvlint: not read: vllm/big.py: too large (20.0 MiB > 10 MiB)" in said, (head, run.stderr)
        assert "kvlint: not read: vllm/zero.py: a symbolic link" in said, (head, run.stderr)
        assert run.returncode == 1, (head, run.stderr)  # the rest is reviewed: the pull request's KV102
        assert "Not read: 2 path(s)" in body(run)


def test_a_configuration_too_large_to_read_is_an_error_not_a_silent_default(tmp_path):
    """The base revision's pyproject.toml is read from git only after its size: too large is one line, exit 2."""
    repo = make_repo(tmp_path)
    git(repo, "checkout", "-qb", "huge-config", "main")
    commit_file(repo, "pyproject.toml", b"[tool.kvlint]\n" + b"#" * (20 * 1024 * 1024) + b"\n")
    run = run_kvlint("review", "--base", "huge-config", "--head", "pr", cwd=repo)  # cannot hang: in-process
    assert run.returncode == 2
    assert run.stderr.splitlines()[-1] == (
        f"kvlint: error: pyproject.toml of {git(repo, 'rev-parse', 'huge-config')[:12]}: not read: "
        "too large (20.0 MiB > 10 MiB)"
    )


def test_every_read_of_a_pull_requests_file_goes_through_the_one_reader(tmp_path):
    """The helper the review's readers share: a regular file inside the tree, never through a link."""
    from kvlint.filesystem import NotRegularFile, read_file_inside

    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "a.py").write_text("x = 1\n")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    os.symlink(tmp_path / "inside" / "a.py", tmp_path / "link.py")
    os.symlink("/", tmp_path / "out")
    os.mkfifo(tmp_path / "pipe.py")
    assert read_file_inside(tmp_path, "inside/a.py") == b"x = 1\n"
    for name in ("zero.py", "link.py", "pipe.py"):
        with pytest.raises(NotRegularFile):
            read_file_inside(tmp_path, name)
    with pytest.raises(OSError, match="under a symbolic link out of the tree"):
        read_file_inside(tmp_path, "out/etc/hostname")


# ------------------------------------------------------------- a failed cross-file analysis (paths, review)


def vllm_repo(tmp_path: Path) -> Path:
    """`main`: a miniature vLLM tree (tests/test_cli.py); `pr`: adds a module with a hand-written scaling."""
    repo = tmp_path / "repo"
    repo.mkdir()
    make_tree(repo)
    (repo / "pkg" / "buggy.py").unlink()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "pr")
    (repo / "pkg" / "buggy.py").write_text(BUGGY)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr: scale by hand")
    return repo


def _replace_resolver_home(repo: Path, kind: str) -> None:
    home = repo / RESOLVER_HOME
    home.unlink()
    if kind == "link":
        os.symlink("/dev/zero", home)
    else:
        os.mkfifo(home)


def test_paths_says_a_failed_cross_file_analysis_and_exits_2(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    make_tree(tree)
    for kind, cause in (("link", "a symbolic link out of the tree"), ("fifo", "not a regular file (FIFO)")):
        _replace_resolver_home(tree, kind)
        run = kvlint("paths", str(tree), cwd=tmp_path)
        assert run.returncode == 2, (kind, run.stderr)
        assert run.stderr.splitlines()[-1] == (
            f"kvlint: error: cross-file analysis incomplete: {RESOLVER_HOME} not read: {cause}"
        )
        assert "Traceback" not in run.stderr


def test_review_lists_a_file_the_cross_file_analysis_could_not_read_and_goes_on(tmp_path):
    """The resolver's home as a link to /dev/zero, or a FIFO in the checkout: the pull request's doing, so
    the review lists it with why and says its cross-file findings may be missing; it exits 1 (0 with
    --exit-zero), never 2, so that the fork-safe workflow posts it (issue 21, item 10; exit 2 before)."""
    repo = vllm_repo(tmp_path)
    _replace_resolver_home(repo, "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr: the resolver's home is a link to /dev/zero")
    runs = {
        # the checkout: the index reads the tree on disk and cannot read the link
        "working tree": (review(repo, head=None), "a symbolic link", 1),
        # the head commit: the link is not written to the scratch tree, so the index lacks the file
        "head": (review(repo, "--exit-zero"), "a symbolic link", 0),
    }
    for mode, (run, cause, code) in runs.items():
        assert f"kvlint: not read: {RESOLVER_HOME}: {cause}" in run.stderr.splitlines(), (mode, run.stderr)
        assert "error" not in run.stderr, (mode, run.stderr)
        assert run.returncode == code, (mode, run.stderr)
        assert f"- `{RESOLVER_HOME}`: {cause}" in body(run)
        assert "**The cross-file analysis did not read 1 of these file(s)**" in body(run)
    # A FIFO in the checkout where the resolver's home was: said, never waited on.
    _replace_resolver_home(repo, "fifo")
    run = review(repo, "--format", "review-data", head=None)
    assert run.returncode == 1
    assert "error" not in run.stderr
    summary = json.loads(run.stdout)["summary"]
    assert summary["analysis_unread"] == 1, "the second stage's body says it too"
    assert {"path": RESOLVER_HOME, "why": "not a regular file (FIFO)"} in summary["not_read"]


def test_the_second_stage_renders_the_incomplete_analysis_from_its_count():
    from kvlint.review.render import summary_body
    from kvlint.review.saved import review_from_data

    saved = review_from_data({"kvlint_review": 1, "commit": None, "summary": {"incomplete": 2}, "comments": []})
    assert "**The cross-file analysis is incomplete**: 2 file(s) or step(s)" in summary_body(saved.summary)
    with pytest.raises(Exception, match="summary.incomplete"):
        review_from_data({"kvlint_review": 1, "commit": None, "summary": {"incomplete": "x"}, "comments": []})


# ------------------------------------------------------------------- extended attributes and ACLs (`fix`)


def _user_xattrs_supported(folder: Path) -> bool:
    probe = folder / ".xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.kvlint-probe", b"1")
    except OSError as error:
        if error.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
            return False
        raise
    finally:
        probe.unlink()
    return True


@pytest.fixture
def fixable(tmp_path, monkeypatch) -> Path:
    if not hasattr(os, "setxattr"):
        pytest.skip("this platform's Python has no xattr calls (os.setxattr): nothing to keep")
    if not _user_xattrs_supported(tmp_path):
        pytest.skip(f"the filesystem of {tmp_path} holds no user extended attributes")
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "pkg" / "buggy.py"


def test_fix_keeps_extended_attributes(fixable):
    os.setxattr(fixable, "user.origin", b"reviewed by a person")
    os.setxattr(fixable, "user.empty", b"")
    inode = fixable.stat().st_ino
    result = CliRunner().invoke(main, ["fix", "--no-cache", "--jobs", "1", "pkg/buggy.py"])
    assert fixable.stat().st_ino != inode, "written by a rename: a new file"
    assert b"resolve_dcp_kv_block_size" in fixable.read_bytes(), result.stderr
    assert sorted(os.listxattr(fixable)) == ["user.empty", "user.origin"]
    assert os.getxattr(fixable, "user.origin") == b"reviewed by a person"


# An access ACL as the kernel stores it (posix_acl_xattr): version 2, then (tag, permissions, id) entries.
_UNDEFINED_ID = 0xFFFFFFFF
_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x10, 0x20


def _acl(*entries: tuple[int, int, int]) -> bytes:
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)


def _give_read_to_user_12345(path: Path, name: str = "system.posix_acl_access") -> None:
    """An ACL granting user 12345 read: with setfacl where it is installed, else by writing the attribute
    setfacl writes (the same bytes)."""
    if shutil.which("setfacl") and name == "system.posix_acl_access":
        subprocess.run(["setfacl", "-m", "u:12345:r", str(path)], check=True)
        return
    os.setxattr(
        path,
        name,
        _acl(
            (_USER_OBJ, 6, _UNDEFINED_ID),
            (_USER, 4, 12345),
            (_GROUP_OBJ, 4, _UNDEFINED_ID),
            (_MASK, 4, _UNDEFINED_ID),
            (_OTHER, 0, _UNDEFINED_ID),
        ),
    )


def test_fix_keeps_an_acl_and_adds_none(tmp_path):
    path = tmp_path / "f.py"
    path.write_bytes(b"old\n")
    path.chmod(0o640)
    try:
        _give_read_to_user_12345(path)
    except OSError as error:
        pytest.skip(f"the filesystem of {tmp_path} holds no POSIX ACL ({error.strerror})")
    acl = os.getxattr(path, "system.posix_acl_access")
    write_atomically(path, b"old\n", b"new\n")
    assert path.read_bytes() == b"new\n"
    assert os.getxattr(path, "system.posix_acl_access") == acl
    assert path.stat().st_mode & 0o7777 == 0o640

    # A folder's default ACL gives the temporary file an ACL the fixed file never had: it is not kept.
    folder = tmp_path / "defaults"
    folder.mkdir()
    _give_read_to_user_12345(folder, "system.posix_acl_default")
    plain = folder / "g.py"
    plain.write_bytes(b"old\n")
    for name in os.listxattr(plain):  # created in that folder, it inherited the default: make it plain
        os.removexattr(plain, name)
    plain.chmod(0o644)
    write_atomically(plain, b"old\n", b"new\n")
    assert plain.read_bytes() == b"new\n" and os.listxattr(plain) == []
    assert plain.stat().st_mode & 0o7777 == 0o644


def test_an_attribute_the_user_may_not_set_refuses_the_write_and_loses_nothing():
    """A `security.` attribute root put on a user's file: the user can read it but not give it to a new file
    (EPERM), so the fix is refused in one line and the old file — bytes and attributes — stays."""
    if os.geteuid() != 0 or not hasattr(os, "fork") or not hasattr(os, "setxattr"):
        pytest.skip("needs root to set the attribute and then to become another user (os.fork, os.setuid)")
    nobody = 65534
    folder = Path(tempfile.mkdtemp())  # not under pytest's 0700 folder: the other user must reach it
    try:
        folder.chmod(0o755)
        path = folder / "f.py"
        path.write_bytes(b"old\n")
        try:
            os.chown(path, nobody, nobody)
            os.chown(folder, nobody, nobody)
            os.setxattr(path, "security.kvlint-test", b"set by root")
        except OSError as error:  # root in a user namespace, or a filesystem without security attributes
            pytest.skip(f"cannot prepare a file for user {nobody} with a security attribute ({error.strerror})")
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            os.close(reader)
            try:
                os.setgroups([])
                os.setgid(nobody)
                os.setuid(nobody)
                write_atomically(path, b"old\n", b"new\n")
                said = "written"
            except FixError as error:
                said = str(error)
            except OSError as error:
                said = f"cannot become user {nobody}: {error.strerror}"
            os.write(writer, said.encode())
            os._exit(0)
        os.close(writer)
        os.waitpid(child, 0)
        with os.fdopen(reader, "rb") as stream:
            said = stream.read().decode()
        if said.startswith("cannot become"):
            pytest.skip(said)
        assert said == (
            "cannot give the new file its extended attribute security.kvlint-test (Operation not permitted): "
            "not written"
        )
        assert path.read_bytes() == b"old\n"
        assert os.getxattr(path, "security.kvlint-test") == b"set by root"
        assert [p.name for p in folder.iterdir()] == ["f.py"], "temporary file left behind"
    finally:
        shutil.rmtree(folder)

"""Expanding paths into the files to scan: order, excludes, skipped folders and bad paths."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from kvlint.scan.files import collect_files, is_excluded


def touch(path: Path, text: str = "x = 1\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def displays(paths, exclude=()):
    files, problems = collect_files(list(paths), list(exclude))
    return [f.display for f in files], [(p.display, p.cause) for p in problems]


def test_depth_first_files_before_subfolders_sorted(tmp_path):
    for name in ("b.py", "a.py", "sub/z.py", "sub/deeper/y.py", "other/x.py", "notes.txt", "script"):
        touch(tmp_path / name)
    found, problems = displays([tmp_path])
    root = str(tmp_path)
    assert found == [
        f"{root}/a.py",
        f"{root}/b.py",
        f"{root}/other/x.py",
        f"{root}/sub/z.py",
        f"{root}/sub/deeper/y.py",
    ]
    assert problems == []


def test_relative_paths_stay_relative(tmp_path, monkeypatch):
    touch(tmp_path / "pkg" / "m.py")
    monkeypatch.chdir(tmp_path)
    files, _ = collect_files([Path("pkg")], [])
    assert [(str(f.path), f.display) for f in files] == [("pkg/m.py", "pkg/m.py")]


def test_display_root_reads_under_it_and_shows_paths_as_given(tmp_path):
    touch(tmp_path / "pkg" / "m.py")
    touch(tmp_path / "pkg" / "generated" / "g.py")
    (tmp_path / "pkg" / "gone.py").symlink_to(tmp_path / "nowhere.py")
    files, problems = collect_files([Path("pkg"), Path("absent.py")], ["pkg/generated"], display_root=tmp_path)
    assert [(f.path, f.display) for f in files] == [(f"{tmp_path}/pkg/m.py", "pkg/m.py")]
    assert [(p.display, p.cause) for p in problems] == [
        ("pkg/gone.py", "dangling symbolic link"),
        ("absent.py", "no such file or directory"),
    ]


def test_skipped_and_excluded_folders(tmp_path):
    for name in (
        ".git/h.py",
        "__pycache__/c.py",
        ".venv/v.py",
        "build/b.py",
        "tests/t.py",
        "pkg/gen_x.py",
        "pkg/keep.py",
    ):
        touch(tmp_path / name)
    found, _ = displays([tmp_path], exclude=["tests", "gen_*.py"])
    assert found == [f"{tmp_path}/pkg/keep.py"]


def test_named_file_is_scanned_whatever_its_suffix_and_once(tmp_path):
    script = touch(tmp_path / "tool")
    module = touch(tmp_path / "m.py")
    found, _ = displays([script, module, tmp_path])
    assert found == [str(script), str(module)]


def test_missing_and_dangling_paths_are_problems(tmp_path):
    (tmp_path / "gone.py").symlink_to(tmp_path / "nowhere.py")
    found, problems = displays([tmp_path / "absent.py", tmp_path / "gone.py", tmp_path])
    assert found == []
    assert problems == [
        (str(tmp_path / "absent.py"), "no such file or directory"),
        (str(tmp_path / "gone.py"), "dangling symbolic link"),
        (str(tmp_path / "gone.py"), "dangling symbolic link"),
    ]


def test_symlinked_folder_is_followed_and_a_loop_walked_once(tmp_path):
    touch(tmp_path / "real" / "m.py")
    (tmp_path / "real" / "loop").symlink_to(tmp_path / "real")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    found, problems = displays([tmp_path])
    assert found == [f"{tmp_path}/alias/m.py"]  # "alias" sorts first; "real" is the same folder
    assert problems == []


def test_symlinked_file_is_scanned_only_inside_the_scanned_folder(tmp_path):
    inside = touch(tmp_path / "pkg" / "data" / "code.txt")
    outside = touch(tmp_path / "elsewhere" / "code.txt")
    (tmp_path / "pkg" / "linked.py").symlink_to(inside)
    (tmp_path / "pkg" / "leaving.py").symlink_to(outside)
    found, problems = displays([tmp_path / "pkg"])
    assert found == [f"{tmp_path}/pkg/linked.py"]
    assert problems == [(f"{tmp_path}/pkg/leaving.py", "symbolic link to a file outside the scanned folder: not read")]


def test_folder_and_socket_named_like_modules_are_not_source_and_the_socket_is_said(tmp_path):
    (tmp_path / "pkg.py").mkdir()
    touch(tmp_path / "pkg.py" / "inner.py")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s.py"))
    except OSError:  # pragma: no cover - path too long for a socket on some systems
        pytest.skip("cannot create a socket here")
    try:
        found, problems = displays([tmp_path])
    finally:
        sock.close()
    assert found == [f"{tmp_path}/pkg.py/inner.py"]
    assert problems == [(f"{tmp_path}/s.py", "not a regular file (socket): not read")]


NOBODY = 65534


def as_unprivileged(function):
    """function() -> JSON-able, run as this user, or (as root, who reads any folder) in a child that became
    user nobody first, as test_security_leftovers does. Skips, saying why, where no other user can be become
    (root of a user namespace mapping only itself, as CI's offline fast loop runs: setuid answers EINVAL)."""
    if os.geteuid() != 0:
        return function()
    if not hasattr(os, "fork"):  # pragma: no cover - root without fork
        pytest.skip("running as root and cannot fork a child to drop privileges in")
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(reader)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        except OSError as error:
            answer = {"cannot": f"running as root and cannot become user {NOBODY} ({error.strerror})"}
        else:
            try:
                answer = {"result": function()}
            except BaseException as error:  # noqa: BLE001 - reported to the parent, which fails the test
                answer = {"error": f"{type(error).__name__}: {error}"}
        os.write(writer, json.dumps(answer).encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    with os.fdopen(reader, "rb") as stream:
        answer = json.loads(stream.read() or b'{"error": "the child said nothing"}')
    if "cannot" in answer:
        pytest.skip(answer["cannot"])
    assert "error" not in answer, answer.get("error")
    return answer["result"]


def test_unlistable_folder_is_a_problem_and_the_rest_goes_on():
    # Not under pytest's own folder (0700, root's): user nobody must reach this one.
    root = Path(tempfile.mkdtemp())
    try:
        root.chmod(0o755)
        touch(root / "ok.py")
        locked = root / "locked"
        touch(locked / "hidden.py")
        locked.chmod(0)
        found, problems = as_unprivileged(lambda: displays([root]))
        locked.chmod(0o755)
        assert found == [f"{root}/ok.py"]
        assert [tuple(problem) for problem in problems] == [(str(locked), "cannot list folder: Permission denied")]
    finally:
        (root / "locked").chmod(0o755)
        shutil.rmtree(root)


@pytest.mark.parametrize(
    ("display", "patterns", "expected"),
    [
        ("vllm/models/llama.py", ["vllm/models"], True),
        ("vllm/models/llama.py", ["models"], True),
        ("vllm/models/llama.py", ["*.py"], True),
        ("vllm/models/llama.py", ["vllm/model"], False),
        ("vllm/v1/core/x.py", ["*/core/*"], True),
        ("vllm/v1/core/x.py", [], False),
    ],
)
def test_is_excluded(display, patterns, expected):
    assert is_excluded(display, patterns) is expected

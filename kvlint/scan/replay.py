"""A whole `kvlint check` (or `kvlint fix --diff`) run kept and replayed while nothing it read has changed: a warm
check of an unchanged tree costs the stat of what the run depended on, not the scan's start-up.

A run is recorded (`start_recording`, then `keep_run` by the `check` or `fix --diff` command) with what it wrote to stdout and
stderr, its exit status, and the stat of everything its output depended on in the filesystem, as
kvlint.filesystem's observer saw it: each folder a walk listed (a file added, removed or renamed there changes
its stat), each file found or read, and each lookup of a marker file (a pyproject.toml, a tree's root: the answer
"none here" is a dependency too), and kvlint's own sources. The record is keyed on everything else the output
may depend on: the arguments, the working folder, the environment, which streams are terminals and how wide,
the interpreter. The next run with the same key replays it when every recorded stat is the same (`replayed`):
the same files with the same stat hold the same bytes, the caches' assumption (kvlint.scan.storage), and so the
run would print the same.

Nothing is kept when the run may not be repeatable or reads what the observer does not see: a cross-file analysis
that failed, an internal error, `--no-cache`, `--vllm-release`, `--baseline-commit` (git), code judged against a
release outside it, `--verbose`; nor when something it depends on changed within RACY_WINDOW_NS of the run's
start (it could change again without its stat changing). Records are signed like every cache file
(kvlint.scan.signing): one this user's kvlint did not write is never replayed.

This module is imported before anything else of kvlint (kvlint.launch): only the standard library's lightest
modules at the top.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from kvlint.scan.signing import cache_key, key_file, signed_document

# Bumped when what a record holds or what its key covers changes: older records are never replayed.
RUN_FORMAT = 1
RACY_WINDOW_NS = 2_000_000_000  # as kvlint.scan.storage's: a stat this recent may not change when the file does
MAX_RUN_BYTES = 64 * 1024 * 1024
MAX_RUNS = 64  # records kept in the folder, newest first
MAX_AGE_S = 30 * 24 * 3600  # a record older than this is dropped when another is kept (as result_cache drops its own)
# Variables a shell changes between commands that nothing of kvlint reads.
_VOLATILE = frozenset({"_", "OLDPWD", "SHLVL"})
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _signature(path: str) -> list | None:
    """What must be the same for `path` to be taken as unchanged (followed through links); None: no such path."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return [info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def _replayable(argv: list[str]) -> bool:
    """`kvlint check …` or `kvlint fix --diff …` (which writes nothing) that may use the caches. The key covers
    every argument: this only says where to look, and a run the command does not keep is never replayed."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return (command == "check" or (command == "fix" and "--diff" in argv)) and "--no-cache" not in argv


def run_folder(argv: list[str], environ) -> str:
    """Where the record of a run with these arguments is kept: beside the result cache (`--cache-dir`'s, else
    $KVLINT_CACHE_DIR's, else the XDG cache folder's: kvlint.scan.storage.cache_root)."""
    folder = None
    for position, argument in enumerate(argv):
        if argument == "--cache-dir" and position + 1 < len(argv):
            folder = argv[position + 1]
        elif argument.startswith("--cache-dir="):
            folder = argument[len("--cache-dir=") :]
    if not folder:
        folder = environ.get("KVLINT_CACHE_DIR") or os.path.join(
            environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kvlint"
        )
    return os.path.join(os.path.abspath(folder), "results", "runs")


def run_key(argv: list[str], environ) -> str:
    """Everything but the filesystem that a run's output may depend on, hashed."""
    ttys = [os.isatty(descriptor) for descriptor in (0, 1, 2)]
    try:
        width = os.get_terminal_size(1).columns if ttys[1] else None
    except OSError:
        width = None
    streams = [(getattr(s, "encoding", None), getattr(s, "errors", None)) for s in (sys.stdin, sys.stdout, sys.stderr)]
    parts = [
        RUN_FORMAT,
        argv,
        os.getcwd(),
        sorted((k, v) for k, v in environ.items() if k not in _VOLATILE),
        ttys,
        width,
        streams,  # how text is written: click writes bytes to a stream it thinks misconfigured (ASCII)
        repr(sys.flags),  # -X utf8, -I, … (an interpreter flag is not in the environment)
        sys.path,  # where the default target's installed vllm is found (.pth files included)
        sys.version,
        sys.executable,
        os.path.dirname(os.path.abspath(__file__)),
    ]
    return hashlib.sha256(json.dumps(parts).encode("ascii")).hexdigest()


def _load(path: str, key: str) -> dict | None:
    secret = cache_key()
    if secret is None:
        return None
    try:
        descriptor = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not (info.st_mode & 0o170000 == 0o100000 and info.st_size <= MAX_RUN_BYTES):  # a regular file, capped
            return None
        data = os.read(descriptor, info.st_size + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    document = signed_document(secret, "run", key, data)
    if document is None:
        return None
    try:
        record = json.loads(document)
    except (ValueError, RecursionError):
        return None
    return record if type(record) is dict else None


def replayed(argv: list[str]) -> int | None:
    """Replay the kept run with these arguments when nothing it depended on changed: its output written, its exit
    status returned. None: the run must happen."""
    if not _replayable(argv) or sys.stdout is None or sys.stderr is None:  # a closed stream: the run says why
        return None
    try:
        key = run_key(argv, os.environ)
        record = _load(os.path.join(run_folder(argv, os.environ), f"{key}.json"), key)
    except (OSError, ValueError):
        return None
    if record is None:
        return None
    depends, stdout, stderr, status = (record.get(k) for k in ("depends", "stdout", "stderr", "status"))
    if type(depends) is not dict or type(stdout) is not str or type(stderr) is not str or type(status) is not int:
        return None
    signature = _signature
    for path, before in depends.items():
        if signature(path) != before:
            return None
    _write_bytes(sys.stdout, stdout.encode("utf-8", "surrogateescape"))
    _write_bytes(sys.stderr, stderr.encode("utf-8", "surrogateescape"))
    return status


def _write_bytes(stream, data: bytes) -> None:
    """The bytes a recorded run wrote to this stream, as they were (its encoding is part of the key)."""
    stream.flush()
    binary = getattr(stream, "buffer", None)
    if binary is not None:
        binary.write(data)
        binary.flush()
    else:  # a text-only stream (a test harness's): its own encoding, which the key fixed
        stream.write(data.decode(getattr(stream, "encoding", None) or "utf-8", "replace"))
        stream.flush()


class _Recording:
    def __init__(self, argv: list[str]):
        self.key = run_key(argv, os.environ)
        self.folder = run_folder(argv, os.environ)
        self.started_ns = time.time_ns()
        # Each path observed, with its signature when first observed: a path whose signature differs at the
        # end changed while the run read it (even with its mtime put back), and the run is not kept.
        self.seen: dict[str, list | None] = {}
        self.stdout = _Tee(sys.stdout)
        self.stderr = _Tee(sys.stderr)


class _Tee:
    """A text stream that writes through to `stream` and keeps the bytes written, as the stream encodes them;
    its `buffer` keeps what is written there too (click writes bytes to a stream whose encoding it distrusts).
    Writing bytes to it fails, as on any text stream: that is how click tells a text stream from a binary one."""

    def __init__(self, stream):
        self._stream = stream
        self.kept: list[bytes] = []
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        self._errors = getattr(stream, "errors", None) or "strict"
        binary = getattr(stream, "buffer", None)
        self.buffer = _BinaryTee(binary, self.kept) if binary is not None else None

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        written = self._stream.write(text)  # first: text the stream cannot encode fails here, as it would
        self.kept.append(text.encode(self._encoding, self._errors))
        return written

    def write_transient(self, text: str) -> int:
        """Written, not kept: progress, which a replay (it has no phases) does not show."""
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _BinaryTee:
    def __init__(self, stream, kept: list[bytes]):
        self._stream = stream
        self._kept = kept

    def write(self, data) -> int:
        written = self._stream.write(data)
        self._kept.append(bytes(data))
        return written

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


_recording: _Recording | None = None


def start_recording(argv: list[str]) -> None:
    """Record this run, when it is one `replayed` could answer next time: its output and what it depends on."""
    global _recording
    if not _replayable(argv) or sys.stdout is None or sys.stderr is None:
        return
    from kvlint import filesystem

    recording = _Recording(argv)
    seen = recording.seen
    working_folder = os.getcwd()  # part of the key: the run's relative paths are read from it

    def observed(kind: str, path: str) -> None:
        # Joined, not normalised: `link/../x` is where the link leads, not `x` beside it (abspath would drop the
        # `..` by its text and watch a path that was never read).
        path = os.path.join(working_folder, path)
        if path not in seen:
            seen[path] = _signature(path)

    filesystem.observe(observed)
    sys.stdout, sys.stderr = recording.stdout, recording.stderr
    _recording = recording


def keep_run(status: int, cache_dir, repeatable: bool) -> None:
    """Keep the run being recorded, which exits with `status`, when it is `repeatable` (the command's judgement:
    see the module's docstring) and its result cache is `cache_dir` (…/results) where its record is looked for."""
    global _recording
    recording, _recording = _recording, None
    if recording is None:
        return
    from kvlint import filesystem

    filesystem.observe(None)
    if not repeatable or cache_dir is None or os.path.join(os.path.abspath(cache_dir), "runs") != recording.folder:
        return
    depends = _dependencies(recording, os.path.abspath(cache_dir))
    if depends is None:
        return
    from pathlib import Path

    from kvlint.scan.storage import save_record

    value = {
        "depends": depends,
        "stdout": b"".join(recording.stdout.kept).decode("utf-8", "surrogateescape"),
        "stderr": b"".join(recording.stderr.kept).decode("utf-8", "surrogateescape"),
        "status": status,
    }
    if save_record(Path(recording.folder) / f"{recording.key}.json", "run", recording.key, value):
        _prune(recording.folder)


def _prune(folder: str) -> None:
    """Keep the folder of kept runs bounded: the newest MAX_RUNS records (one per way kvlint was invoked; ~0.5 MB
    each on vLLM 0.34.0), none older than MAX_AGE_S, and no temporary file a killed run left."""
    try:
        with os.scandir(folder) as listing:
            found = [(entry.stat(follow_symlinks=False).st_mtime, entry.path) for entry in listing]
    except OSError:
        return
    cutoff = time.time() - MAX_AGE_S
    found.sort(reverse=True)
    for position, (modified, path) in enumerate(found):
        if position >= MAX_RUNS or modified < cutoff:
            try:
                os.unlink(path)
            except OSError:
                pass


def _dependencies(recording: _Recording, cache_dir: str) -> dict[str, list | None] | None:
    """Each path the run depended on with its signature; None when one changed too recently to be trusted."""
    paths = {*recording.seen, *_own_sources()}
    # kvlint's own state is not what the output depends on: the caches answer as the scan would, and the key
    # decides whether they are read at all.
    own = (cache_dir + os.sep, os.path.dirname(key_file()) + os.sep)
    depends: dict[str, list | None] = {}
    racy = recording.started_ns - RACY_WINDOW_NS
    for path in sorted(paths):
        plain = os.path.normpath(path)  # only to tell kvlint's own state apart
        if plain.startswith(own) or plain + os.sep in own:
            continue
        signature = _signature(path)
        if signature is not None and signature[2] >= racy:
            return None
        if path in recording.seen and recording.seen[path] != signature:
            return None  # changed while the run read it
        depends[path] = signature
    return depends


def _own_sources() -> list[str]:
    """kvlint's own source files and folders (the rules included), and the source of every module this run
    imported (click, libcst, packaging, …): an edited kvlint, or an upgraded dependency, replays nothing it recorded."""
    import kvlint
    import kvlint.rules

    found = []
    for top in {os.path.dirname(os.path.abspath(kvlint.__file__)), *map(os.path.abspath, kvlint.rules.__path__)}:
        for folder, folders, names in os.walk(top):
            folders[:] = [name for name in folders if name != "__pycache__"]
            found.append(folder)
            found.extend(os.path.join(folder, name) for name in names if name.endswith(".py"))
    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if isinstance(source, str):
            found.append(os.path.abspath(source))
    return found

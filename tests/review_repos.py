"""Small git repositories for the review's security tests, and a way to run `kvlint review` on them.

The tree is tiny but real to kvlint: one module whose hand-written DCP scaling is a KV102 finding (with a
KV103 on its function), which the pull request adds. A test then adds whatever a hostile pull request
would (attributes, odd file names, suppressions) on top.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kvlint_runner import run_kvlint

CLEAN = "def tokens(group, parallel_config):\n    return group.kv_cache_spec.block_size\n"
SCALED = "def tokens(group, parallel_config):\n    return group.kv_cache_spec.block_size * parallel_config.decode_context_parallel_size\n"
MODULE = "vllm/sizing.py"


def git(repo: Path, *arguments: str, input_bytes: bytes | None = None) -> str:
    completed = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *arguments],
        check=True,
        capture_output=True,
        input=input_bytes,
    )
    return completed.stdout.decode("utf-8", "surrogateescape").strip()


def kvlint(*arguments: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_kvlint(*arguments, cwd=cwd, env=env)


def make_repo(root: Path) -> Path:
    """`main`: a clean module; `pr` (checked out): the module scales the block size by hand (KV102)."""
    repo = root / "repo"
    (repo / "vllm").mkdir(parents=True)
    (repo / MODULE).write_text(CLEAN)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "pr")
    (repo / MODULE).write_text(SCALED)
    git(repo, "commit", "-qam", "pr: scale by hand")
    return repo


def commit_file(repo: Path, path: str | bytes, content: bytes, message: str = "add a file") -> None:
    """Commit `content` at `path` through the index only: the name need not be one this system can create."""
    raw = path if isinstance(path, bytes) else path.encode()
    sha = git(repo, "hash-object", "-w", "--stdin", input_bytes=content)
    git(repo, "update-index", "-z", "--index-info", input_bytes=b"100644 " + sha.encode() + b"\t" + raw + b"\0")
    git(repo, "commit", "-qm", message)


def review(repo: Path, *extra: str, head: str | None = "pr", env: dict | None = None) -> subprocess.CompletedProcess:
    arguments = ["review", "--base", "main", *(["--head", head] if head else []), *extra]
    return kvlint(*arguments, cwd=repo, env=env)


def comments(run: subprocess.CompletedProcess) -> list[dict]:
    return json.loads(run.stdout)["comments"]

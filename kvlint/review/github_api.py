"""Post a review through GitHub's REST API without repeating earlier ones (stdlib urllib only).

Every kvlint comment starts with hidden markers (`<!-- kvlint:KV102:path:fingerprint -->`). On a new
push, an earlier kvlint comment whose markers are no longer found (the code was fixed) or whose line
went stale is deleted, one that still stands is left alone, and only new comments are posted.

The token is sent to the configured API host only (redirects are refused, never followed with the
token) and is scrubbed from every message kvlint prints.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from kvlint.errors import GitHubError
from kvlint.review.review import MARKER_PREFIX, markers_in

DEFAULT_API_URL = "https://api.github.com"
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_PAGE_SIZE = 100
_MAX_PAGES = 50
_TIMEOUT_S = 30


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib would resend the Authorization header to wherever the redirect points


@dataclass
class SyncOutcome:
    posted: int
    kept: int
    deleted: int


class GitHub:
    def __init__(self, api_url: str, token: str, repository: str):
        parsed = urllib.parse.urlsplit(api_url)
        if parsed.scheme not in ("https", "http") or not parsed.netloc:
            raise GitHubError(f"GITHUB_API_URL must be an http(s) URL, got {api_url!r}")
        if not token:
            raise GitHubError("no token: set GITHUB_TOKEN to post the review")
        if not _REPOSITORY.match(repository or ""):
            raise GitHubError(f"GITHUB_REPOSITORY must be owner/name, got {repository!r}")
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self._token = token
        self._opener = urllib.request.build_opener(_NoRedirect)

    def redact(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def request(self, method: str, path: str, payload: dict | None = None, query: dict | None = None):
        url = f"{self.api_url}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", "kvlint-review")
        request.add_header("Authorization", f"Bearer {self._token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=_TIMEOUT_S) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            raise GitHubError(self._http_error(method, path, error)) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise GitHubError(self.redact(f"cannot reach the GitHub API at {self.api_url} ({method} {path}): {reason}")) from None
        if not body:
            return None
        try:
            return json.loads(body)
        except ValueError:
            raise GitHubError(f"GitHub API answered {method} {path} with something that is not JSON") from None

    def _http_error(self, method: str, path: str, error: urllib.error.HTTPError) -> str:
        detail = ""
        try:
            document = json.loads(error.read() or b"{}")
            if isinstance(document, dict):
                detail = str(document.get("message") or "")
                errors = document.get("errors")
                if isinstance(errors, list) and errors:
                    detail += f" ({'; '.join(str(e.get('message', e)) if isinstance(e, dict) else str(e) for e in errors[:3])})"
        except (ValueError, OSError):
            pass
        status = f"{error.code} {error.reason}".strip()
        text = f"GitHub API answered {status} to {method} {path}" + (f": {detail}" if detail else "")
        if 300 <= error.code < 400:
            text += " (redirects are not followed, so the token is never sent elsewhere)"
        return self.redact(" ".join(text.split()))

    def review_comments(self, pull: int) -> list[dict]:
        comments: list[dict] = []
        for page in range(1, _MAX_PAGES + 1):
            batch = self.request("GET", f"/repos/{self.repository}/pulls/{pull}/comments", query={"per_page": _PAGE_SIZE, "page": page})
            if not isinstance(batch, list):
                raise GitHubError("GitHub API answered the list of review comments with something that is not a list")
            comments.extend(c for c in batch if isinstance(c, dict))
            if len(batch) < _PAGE_SIZE:
                break
        return comments

    def delete_comment(self, comment_id: int) -> None:
        self.request("DELETE", f"/repos/{self.repository}/pulls/comments/{int(comment_id)}")

    def create_review(self, pull: int, payload: dict) -> dict:
        return self.request("POST", f"/repos/{self.repository}/pulls/{pull}/reviews", payload)


def sync_review(client: GitHub, pull: int, payload: dict) -> SyncOutcome:
    """Delete stale kvlint comments, keep standing ones, post the new ones (in one review)."""
    wanted = {markers_in(c["body"]): c for c in payload["comments"]}
    existing = [c for c in client.review_comments(pull) if str(c.get("body", "")).startswith(MARKER_PREFIX) and not c.get("in_reply_to_id")]
    standing: set[tuple[str, ...]] = set()
    deleted = 0
    for old in existing:
        key = markers_in(old["body"])
        new = wanted.get(key)
        # GitHub sets `line` to null when the commented line is outdated: then a fresh comment replaces it.
        if new is not None and key not in standing and old.get("line", new["line"]) == new["line"] and old.get("path") == new["path"]:
            standing.add(key)
            continue
        client.delete_comment(old["id"])
        deleted += 1
    fresh = [c for key, c in wanted.items() if key not in standing]
    if fresh:
        client.create_review(pull, {**payload, "comments": fresh})
    return SyncOutcome(posted=len(fresh), kept=len(standing), deleted=deleted)


def pull_request_number(explicit: int | None) -> int:
    """--pr, else the pull request of the event that started the workflow (pull_request or workflow_run)."""
    if explicit is not None:
        return explicit
    event_path = os.environ.get("GITHUB_EVENT_PATH")
    if not event_path:
        raise GitHubError("no pull request number: pass --pr N or run in a pull_request workflow (GITHUB_EVENT_PATH)")
    try:
        with open(event_path, encoding="utf-8") as stream:
            event = json.load(stream)
    except (OSError, ValueError) as error:
        raise GitHubError(f"cannot read GITHUB_EVENT_PATH: {error}") from None
    number = (event.get("pull_request") or {}).get("number")
    if number is None:
        pulls = (event.get("workflow_run") or {}).get("pull_requests") or []
        number = pulls[0].get("number") if pulls else None
    if not isinstance(number, int):
        raise GitHubError("the workflow event names no pull request: pass --pr N")
    return number


def client_from_environment() -> GitHub:
    return GitHub(
        os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
        os.environ.get("GITHUB_TOKEN", ""),
        os.environ.get("GITHUB_REPOSITORY", ""),
    )


_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_MAX_BODY = 65_000
_MAX_COMMENTS = 300


def validate_payload(payload) -> dict:
    """A saved review, rebuilt from the fields kvlint writes; anything else is refused.

    The first stage of the fork-safe workflow runs with the fork's code, so its artifact is untrusted:
    it may only say what a kvlint review says (COMMENT event, marked comments on safe paths).
    """
    from kvlint.review.diff import ReviewError, safe_relative_path

    def refuse(why: str):
        raise ReviewError(f"the saved review is not one kvlint writes: {why}")

    if not isinstance(payload, dict) or payload.get("event") != "COMMENT":
        refuse("event must be COMMENT")
    body = payload.get("body", "")
    if not isinstance(body, str) or len(body) > _MAX_BODY:
        refuse("bad body")
    clean: dict = {"event": "COMMENT", "body": body, "comments": []}
    commit = payload.get("commit_id")
    if commit is not None:
        if not isinstance(commit, str) or not _COMMIT.match(commit):
            refuse("bad commit_id")
        clean["commit_id"] = commit
    comments = payload.get("comments", [])
    if not isinstance(comments, list) or len(comments) > _MAX_COMMENTS:
        refuse("comments must be a list")
    for comment in comments:
        if not isinstance(comment, dict):
            refuse("a comment is not an object")
        path, line, text = comment.get("path"), comment.get("line"), comment.get("body")
        if not isinstance(path, str) or safe_relative_path(path) is not None:
            refuse(f"comment path {path!r}")
        if not isinstance(line, int) or isinstance(line, bool) or line < 1 or comment.get("side") != "RIGHT":
            refuse("comment line/side")
        if not isinstance(text, str) or not text.startswith(MARKER_PREFIX) or len(text) > _MAX_BODY:
            refuse("comment body without a kvlint marker")
        entry = {"path": path, "line": line, "side": "RIGHT", "body": text}
        start = comment.get("start_line")
        if start is not None:
            if not isinstance(start, int) or isinstance(start, bool) or not 1 <= start < line:
                refuse("comment start_line")
            entry["start_line"], entry["start_side"] = start, "RIGHT"
        clean["comments"].append(entry)
    return clean


def check_head(client: GitHub, pull: int, payload: dict | None = None) -> None:
    """In a workflow_run, the pull request's head must still be the commit the first stage reviewed
    (which the saved review, when it names a commit, must name too)."""
    event_path = os.environ.get("GITHUB_EVENT_PATH")
    if not event_path:
        return
    try:
        with open(event_path, encoding="utf-8") as stream:
            head_sha = ((json.load(stream) or {}).get("workflow_run") or {}).get("head_sha")
    except (OSError, ValueError):
        return
    if not head_sha:
        return
    named = (payload or {}).get("commit_id")
    if named and named != head_sha:
        raise GitHubError(f"the saved review is for {named}, but the workflow run was for {head_sha}: not posting")
    pull_request = client.request("GET", f"/repos/{client.repository}/pulls/{pull}") or {}
    actual = ((pull_request.get("head") or {}) if isinstance(pull_request, dict) else {}).get("sha")
    if actual != head_sha:
        raise GitHubError(f"pull request #{pull} is at {actual or 'an unknown commit'}, not the reviewed {head_sha}: not posting")

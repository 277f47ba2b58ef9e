"""Post a review through GitHub's REST API without repeating earlier ones (stdlib urllib only).

Every kvlint comment starts with hidden markers (`<!-- kvlint:KV102:path:fingerprint -->`), each a whole
line. On a new push kvlint posts the comments whose markers are not standing yet first, then deletes its
earlier comments whose finding is gone, whose line went stale, or that a concurrent run posted twice. Only
comments written by the account the token belongs to, starting with complete markers, are ever touched.

The token is checked before use (no whitespace or control character), sent to the configured API host
only (redirects are refused, never followed with the token) and scrubbed from every message. Each request
has a total deadline, so a server that drips its answer cannot hold the review.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from kvlint.escaping import printable
from kvlint.review.review import leading_markers
from kvlint.review.transport import (
    Deadline,
    GitHubError,
    checked_token,
    opener_for,
    redactor,
)

DEFAULT_API_URL = "https://api.github.com"
_REPOSITORY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_PAGE_SIZE = 100
_MAX_PAGES = 50
_READ_TIMEOUT_S = 30  # one socket operation
REQUEST_DEADLINE_S = 60.0  # one request, however its bytes arrive
SESSION_DEADLINE_S = 600.0  # everything one review sends
_MAX_ANSWER_BYTES = 64 * 1024 * 1024
_VIEWER_QUERY = "query { viewer { login databaseId } }"


@dataclass
class SyncOutcome:
    posted: int
    kept: int
    deleted: int


@dataclass(frozen=True)
class Identity:
    """The account the token acts as (a person, or an app's bot such as github-actions[bot])."""

    login: str
    user_id: int | None

    def wrote(self, comment: dict) -> bool:
        user = comment.get("user")
        if not isinstance(user, dict):
            return False
        if self.user_id is not None and isinstance(user.get("id"), int):
            return user["id"] == self.user_id
        login = user.get("login")
        # GraphQL names a bot `name`, REST `name[bot]`.
        return isinstance(login, str) and login.lower().removesuffix("[bot]") == self.login.lower().removesuffix(
            "[bot]"
        )


class GitHub:
    def __init__(
        self,
        api_url: str,
        token: str,
        repository: str,
        graphql_url: str | None = None,
        request_deadline_s: float = REQUEST_DEADLINE_S,
        session_deadline_s: float = SESSION_DEADLINE_S,
    ):
        self.redact = redactor(token)
        parsed = urllib.parse.urlsplit(api_url)
        if parsed.scheme not in ("https", "http") or not parsed.netloc:
            raise GitHubError(f"GITHUB_API_URL must be an http(s) URL, got {api_url!r}")
        self._token = checked_token(token)
        owner, _, name = (repository or "").partition("/")
        if not owner or not name or not set(owner + name) <= _REPOSITORY_CHARS:
            raise GitHubError(f"GITHUB_REPOSITORY must be owner/name, got {repository!r}")
        self.api_url = api_url.rstrip("/")
        self.graphql_url = (graphql_url or _graphql_url_for(self.api_url)).rstrip("/")
        graphql = urllib.parse.urlsplit(self.graphql_url)
        if (graphql.scheme, graphql.netloc) != (parsed.scheme, parsed.netloc):
            raise GitHubError(
                "GITHUB_GRAPHQL_URL must be on the same host as GITHUB_API_URL (the token goes nowhere else)"
            )
        self.repository = repository
        self._request_deadline_s = request_deadline_s
        self._session_deadline_s = session_deadline_s
        self._session_ends = time.monotonic() + session_deadline_s

    def request(
        self, method: str, path: str, payload: dict | None = None, query: dict | None = None, url: str | None = None
    ):
        url = url or f"{self.api_url}{path}"
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
        seconds = min(self._request_deadline_s, self._session_ends - time.monotonic())
        if seconds <= 0:
            raise GitHubError(
                f"the GitHub API calls of this review took longer than {self._session_deadline_s:.0f}s in all ({method} {path} not sent)"
            )
        deadline = Deadline(seconds)
        opener = opener_for(deadline)
        failure: str | None = None
        status: int | None = None
        body = b""
        with deadline:
            try:
                with opener.open(request, timeout=min(_READ_TIMEOUT_S, seconds)) as response:
                    body = response.read(_MAX_ANSWER_BYTES + 1)
            except urllib.error.HTTPError as error:
                failure, status = self._http_error(method, path, error), error.code
            except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
                reason = getattr(error, "reason", None) or error
                failure = (
                    f"cannot reach the GitHub API at {self.api_url} ({method} {path}): {type(error).__name__}: {reason}"
                )
        if deadline.expired:
            raise GitHubError(f"GitHub API did not answer {method} {path} within {deadline.seconds:.0f}s")
        if failure is not None:
            raise GitHubError(self.redact(" ".join(failure.split())), status)
        if len(body) > _MAX_ANSWER_BYTES:
            raise GitHubError(
                f"GitHub API answered {method} {path} with more than {_MAX_ANSWER_BYTES // (1024 * 1024)} MiB"
            )
        if not body:
            return None
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise GitHubError(f"GitHub API answered {method} {path} with something that is not JSON") from None

    def _http_error(self, method: str, path: str, error: urllib.error.HTTPError) -> str:
        detail = ""
        try:
            document = json.loads(error.read(1024 * 1024) or b"{}")
            if isinstance(document, dict):
                detail = str(document.get("message") or "")[:500]
                errors = document.get("errors")
                if isinstance(errors, list) and errors:
                    detail += f" ({'; '.join(str(e.get('message', e)) if isinstance(e, dict) else str(e) for e in errors[:3])[:500]})"
        except (ValueError, OSError, RecursionError, http.client.HTTPException):
            pass
        status = f"{error.code} {error.reason}".strip()
        text = f"GitHub API answered {status} to {method} {path}" + (f": {detail}" if detail else "")
        if 300 <= error.code < 400:
            text += " (redirects are not followed, so the token is never sent elsewhere)"
        return text

    def identity(self) -> Identity:
        """Who the token acts as: GraphQL's viewer (works for app installation tokens such as the
        workflow's GITHUB_TOKEN, which GET /user refuses), else GET /user."""
        try:
            answer = self.request("POST", "/graphql", {"query": _VIEWER_QUERY}, url=self.graphql_url)
            viewer = ((answer or {}).get("data") or {}).get("viewer") if isinstance(answer, dict) else None
            if isinstance(viewer, dict) and isinstance(viewer.get("login"), str) and viewer["login"]:
                user_id = viewer.get("databaseId")
                return Identity(
                    viewer["login"], user_id if isinstance(user_id, int) and not isinstance(user_id, bool) else None
                )
            first = "GraphQL answered no viewer"
        except GitHubError as error:
            if error.status is None:  # not an answer (unreachable, too slow): asking again elsewhere won't help
                raise
            first = str(error)
        try:
            user = self.request("GET", "/user")
        except GitHubError as error:
            raise GitHubError(
                f"cannot tell which account the token belongs to ({first}; {error}); kvlint only ever deletes its own comments, so it does not post"
            ) from None
        if not isinstance(user, dict) or not isinstance(user.get("login"), str) or not user["login"]:
            raise GitHubError("GitHub API answered GET /user without a login")
        user_id = user.get("id")
        return Identity(user["login"], user_id if isinstance(user_id, int) and not isinstance(user_id, bool) else None)

    def review_comments(self, pull: int) -> list[dict]:
        comments: list[dict] = []
        where = f"/repos/{self.repository}/pulls/{pull}/comments"
        for page in range(1, _MAX_PAGES + 1):
            batch = self.request("GET", where, query={"per_page": _PAGE_SIZE, "page": page})
            if not isinstance(batch, list):
                raise GitHubError(f"GitHub API answered GET {where} with something that is not a list")
            comments.extend(_checked_comment(comment, where) for comment in batch)
            if len(batch) < _PAGE_SIZE:
                break
        return comments

    def delete_comment(self, comment_id: int) -> bool:
        """False when the comment was already gone (a concurrent run deleted it)."""
        try:
            self.request("DELETE", f"/repos/{self.repository}/pulls/comments/{int(comment_id)}")
        except GitHubError as error:
            if error.status == 404:
                return False
            raise
        return True

    def create_review(self, pull: int, payload: dict) -> dict:
        answer = self.request("POST", f"/repos/{self.repository}/pulls/{pull}/reviews", payload)
        return answer if isinstance(answer, dict) else {}


def _graphql_url_for(api_url: str) -> str:
    """api.github.com/graphql; on GitHub Enterprise Server, https://HOST/api/v3 → https://HOST/api/graphql."""
    if api_url.endswith("/api/v3"):
        return api_url[: -len("/v3")] + "/graphql"
    return f"{api_url}/graphql"


def _checked_comment(comment, where: str) -> dict:
    """A review comment with the fields kvlint relies on, of the right types; else a GitHubError."""

    def malformed(what: str):
        raise GitHubError(f"GitHub API answered GET {where} with a comment {what}")

    if not isinstance(comment, dict):
        malformed("that is not an object")
    if not isinstance(comment.get("id"), int) or isinstance(comment.get("id"), bool):
        malformed("without a numeric id")
    if not isinstance(comment.get("body") or "", str):
        malformed(f"{comment['id']} whose body is not text")
    if comment.get("line") is not None and not isinstance(comment.get("line"), int):
        malformed(f"{comment['id']} whose line is not a number")
    return comment


def sync_review(client: GitHub, pull: int, payload: dict) -> SyncOutcome:
    """Post the comments not standing yet (in one review), then delete kvlint's own stale and duplicate ones.

    Posting comes first, so a failed post leaves the earlier comments in place. After posting, the list is
    read again: when two runs posted the same finding concurrently, every run keeps the oldest copy.
    """
    me = client.identity()
    wanted = {leading_markers(c["body"]): c for c in payload["comments"]}
    mine = _kvlint_comments(client.review_comments(pull), me)
    standing = set(_standing(mine, wanted))
    fresh = [c for key, c in wanted.items() if key not in standing]
    if fresh:
        client.create_review(pull, {**payload, "comments": fresh})
        mine = _kvlint_comments(client.review_comments(pull), me)
    keep = set(_standing(mine, wanted).values())
    deleted = sum(1 for old in mine if old["id"] not in keep and client.delete_comment(old["id"]))
    return SyncOutcome(posted=len(fresh), kept=len(standing), deleted=deleted)


def _kvlint_comments(comments: list[dict], me: Identity) -> list[dict]:
    """The comments this account wrote that start with complete kvlint markers (replies excluded), oldest first."""
    return sorted(
        (c for c in comments if me.wrote(c) and leading_markers(c.get("body") or "") and not c.get("in_reply_to_id")),
        key=lambda c: c["id"],
    )


def _standing(mine: list[dict], wanted: dict) -> dict[tuple[str, ...], int]:
    """markers -> id of the oldest comment that still says what the new review says, on the same line.

    GitHub sets `line` to null when the commented line is outdated: then a fresh comment replaces it.
    """
    standing: dict[tuple[str, ...], int] = {}
    for old in mine:
        key = leading_markers(old.get("body") or "")
        new = wanted.get(key)
        if (
            new is not None
            and key not in standing
            and old.get("line") == new["line"]
            and old.get("path") == new["path"]
        ):
            standing[key] = old["id"]
    return standing


def pull_request_number(explicit: int | None) -> int:
    """--pr, else the pull request of the event that started the workflow (pull_request or workflow_run)."""
    if explicit is not None:
        return explicit
    event = _event()
    if event is None:
        raise GitHubError("no pull request number: pass --pr N or run in a pull_request workflow (GITHUB_EVENT_PATH)")
    number = _field(event, "pull_request", "number")
    if number is None:
        pulls = _field(event, "workflow_run", "pull_requests")
        number = _field(pulls[0], "number") if isinstance(pulls, list) and pulls else None
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise GitHubError("the workflow event names no pull request: pass --pr N")
    return number


def _event() -> dict | None:
    event_path = os.environ.get("GITHUB_EVENT_PATH")
    if not event_path:
        return None
    try:
        with open(event_path, encoding="utf-8") as stream:
            event = json.load(stream)
    except (OSError, ValueError, RecursionError) as error:
        raise GitHubError(f"cannot read GITHUB_EVENT_PATH: {error}") from None
    return event if isinstance(event, dict) else {}


def _field(document, *keys):
    for key in keys:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def token_from_environment() -> str:
    return os.environ.get("GITHUB_TOKEN", "")


def client_from_environment() -> GitHub:
    return GitHub(
        os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
        token_from_environment(),
        os.environ.get("GITHUB_REPOSITORY", ""),
        graphql_url=os.environ.get("GITHUB_GRAPHQL_URL") or None,
    )


def check_head(client: GitHub, pull: int, commit: str | None) -> None:
    """In a workflow_run, the pull request's head must still be the commit the first stage reviewed
    (which the saved review, when it names a commit, must name too)."""
    event = _event() or {}
    head_sha = _field(event, "workflow_run", "head_sha")
    if not isinstance(head_sha, str) or not head_sha:
        return
    if commit and commit != head_sha:
        raise GitHubError(f"the saved review is for {commit}, but the workflow run was for {head_sha}: not posting")
    pull_request = client.request("GET", f"/repos/{client.repository}/pulls/{pull}")
    actual = _field(pull_request, "head", "sha")
    if actual != head_sha:
        shown = actual if isinstance(actual, str) and actual.isalnum() else "an unknown commit"
        raise GitHubError(f"pull request #{pull} is at {shown[:64]}, not the reviewed {head_sha}: not posting")
    # The same commit may head another pull request: its branch and repository must be the run's too.
    for what, expected, actual_value in (
        ("branch", _field(event, "workflow_run", "head_branch"), _field(pull_request, "head", "ref")),
        (
            "repository",
            _field(event, "workflow_run", "head_repository", "full_name"),
            _field(pull_request, "head", "repo", "full_name"),
        ),
    ):
        if isinstance(expected, str) and expected and actual_value != expected:
            raise GitHubError(
                f"pull request #{pull} is not from the reviewed {what} ({printable(expected)}): not posting"
            )

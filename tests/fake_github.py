"""A fake GitHub on 127.0.0.1 for the review tests: it records every request and keeps a pull request's
review comments the way GitHub does (list, create through a review, delete), with their authors."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOT = {"login": "kvlint-bot[bot]", "id": 4242, "type": "Bot"}
PERSON = {"login": "maintainer", "id": 7, "type": "User"}
BODY_LIMIT = 65_536  # GitHub's limit on a review's or a comment's body, in characters


_BODY_TOO_LONG = (
    422,
    {"message": "Unprocessable Entity", "errors": ["Body is too long (maximum is 65536 characters)"]},
)


def _too_long(body: str) -> bool:
    """Over GitHub's limit, counted in UTF-16 code units (a character outside the BMP counts two)."""
    return len(body.encode("utf-16-le", "surrogatepass")) // 2 > BODY_LIMIT


class FakeGitHub:
    def __init__(self):
        self.requests: list[dict] = []
        self.comments: dict[int, dict] = {}
        self.next_id = 100
        self.failure: tuple[int, dict] | None = None  # answer every request with this
        self.review_failure: tuple[int, dict] | None = None  # answer POST …/reviews with this
        self.answers: dict[tuple[str, str], tuple] = {}  # (method, path) -> (status, document[, headers])
        self.drip_s: float | None = None  # send the body one byte per drip_s seconds
        self.graphql_refused = False
        self.user_refused = False
        self.head_sha = ""
        self.head_ref: str | None = None  # the pull request's head branch, when a test sets one
        self.head_repository: str | None = None  # and its repository (`owner/name`)
        self.identity = BOT
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, document=None, headers: dict | None = None):
                data = b"" if document is None else json.dumps(document).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if fake.drip_s is None:
                    self.wfile.write(data)
                    return
                for byte in data:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(fake.drip_s)

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                fake.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "body": body,
                        "authorization": self.headers.get("Authorization"),
                    }
                )
                return self._answer(*fake.route(self.command, self.path, body))

            do_GET = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def route(self, method: str, full_path: str, body) -> tuple:
        """The answer to one request, as (status, document[, headers]), the way GitHub answers it."""
        if self.failure:
            return self.failure
        path = full_path.split("?")[0]
        if (method, path) in self.answers:
            return self.answers[(method, path)]
        if method == "POST" and path == "/graphql":
            if self.graphql_refused:
                return 200, {"errors": [{"message": "Resource not accessible by integration"}]}
            viewer = {"login": self.identity["login"].removesuffix("[bot]"), "databaseId": self.identity["id"]}
            return 200, {"data": {"viewer": viewer}}
        if method == "GET" and path == "/user":
            if self.user_refused:
                return 403, {"message": "Resource not accessible by integration"}
            return 200, self.identity
        if method == "GET" and path == "/repos/o/r/pulls/7/comments":
            return 200, list(self.comments.values()) if "page=1" in full_path else []
        if method == "GET" and path == "/repos/o/r/pulls/7":
            head = {"sha": self.head_sha}
            if self.head_ref is not None:
                head["ref"] = self.head_ref
            if self.head_repository is not None:
                head["repo"] = {"full_name": self.head_repository}
            return 200, {"number": 7, "head": head}
        if method == "POST" and path == "/repos/o/r/pulls/7/reviews":
            return self._review(body)
        match = re.fullmatch(r"/repos/o/r/pulls/comments/(\d+)", path)
        if method == "DELETE" and match and int(match.group(1)) in self.comments:
            del self.comments[int(match.group(1))]
            return (204,)
        return 404, {"message": "Not Found"}

    def _review(self, body) -> tuple:
        """POST …/reviews: the review's comments are added, unless GitHub would refuse it."""
        if self.review_failure:
            return self.review_failure
        if any(map(_too_long, [body.get("body") or "", *(c["body"] for c in body["comments"])])):
            return _BODY_TOO_LONG  # as GitHub answers: the whole review is refused, nothing is posted
        for comment in body["comments"]:
            self.add_comment(comment["path"], comment["line"], comment["body"], self.identity)
        return 200, {"id": 1, "state": "COMMENTED", "user": self.identity}

    def add_comment(self, path: str, line: int | None, body: str, user: dict) -> int:
        self.next_id += 1
        self.comments[self.next_id] = {
            "id": self.next_id,
            "path": path,
            "line": line,
            "body": body,
            "user": dict(user),
            "in_reply_to_id": None,
        }
        return self.next_id

    def of(self, method: str) -> list[dict]:
        return [r for r in self.requests if r["method"] == method and r["path"] != "/graphql"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

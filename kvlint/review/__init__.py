"""`kvlint review`: lint only what a pull request changes and turn it into a GitHub review.

git.py runs git so that nothing from the pull request runs; diff.py reads the change (snapshot.py turns a
working tree into a tree without filters); pipeline.py scans what changed; review.py decides which findings
are in the diff and builds the comments (suggestions.py finds each fix's lines); render.py writes the
formats; saved.py is the review as data for the fork-safe second stage; github_api.py posts (over
transport.py: deadlines, no redirects, the token checked and redacted). What each
guarantees against hostile input: docs/security.md.
"""

"""`kvlint review`: lint only what a pull request changes and turn it into a GitHub review.

diff.py reads the change from git (never running the pull request's code), review.py decides which
findings are in the diff and builds the comments, render.py writes the formats, github_api.py posts.
"""

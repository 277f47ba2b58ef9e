#!/usr/bin/env bash
# Coverage of the fast loop (`pytest -m "not slow"`, what CI runs on Python 3.10 and 3.13), per module of
# kvlint/ and rules/, in-process code only (kvlint run as a child process is not counted).
#   scripts/coverage_fast.sh [PYTEST ARGS...]      PYTHON (default .venv/bin/python) runs it
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
exec "$PYTHON" -m pytest -q -m "not slow" -p no:cacheprovider --cov=kvlint --cov=rules --cov-report=term "$@"

#!/usr/bin/env bash
# Run kvlint's GPU tests (tests/gpu, marker `gpu`) on a CUDA machine, in under five minutes.
#
#   scripts/gpu_check.sh prepare [BUNDLE]   here, with PyPI and kvlint's dev environment:
#       take vLLM 0.29.0's sources, rewrite a copy with `kvlint fix`, keep only the ~40
#       modules the GPU tests import (vLLM's wheel is too large to carry), and dry-run the
#       tests on the CPU against that bundle. BUNDLE defaults to .gpu-bundle (git-excluded).
#   scripts/gpu_check.sh run [BUNDLE]       on the GPU machine, with its own python3 + torch:
#       the GPU tests against the bundle. Needs only torch, numpy, packaging, regex, pytest.
#   scripts/gpu_check.sh [BUNDLE]           both, where one machine has PyPI and a GPU.
#
# Environment: PYTHON (default python3) runs kvlint and, in `run`, the tests;
# GPU_CHECK_TIMEOUT (default 280 seconds) bounds the test run.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
PYTHON="${PYTHON:-python3}"
VLLM_VERSION=0.29.0
OFFLOADING_CONFIG=vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py

die() { echo "gpu_check: $*" >&2; exit 2; }

prepare() {
    local bundle="$1" sources work venv_python files
    sources="$("$PYTHON" -c "from kvlint.scan.releases import release_sources; print(release_sources('$VLLM_VERSION', quiet=True))")" \
        || die "could not fetch vLLM $VLLM_VERSION's sources"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' RETURN
    cp -r "$sources/vllm" "$work/vllm"
    echo "gpu_check: kvlint fix on a copy of vLLM $VLLM_VERSION's sources" >&2
    local status=0
    "$PYTHON" -m kvlint fix "$work" >/dev/null || status=$?
    [ "$status" -le 1 ] || die "kvlint fix failed (exit $status)"
    grep -q "resolve_dcp_kv_block_size(" "$work/$OFFLOADING_CONFIG" \
        || die "kvlint fix did not rewrite $OFFLOADING_CONFIG"

    # The module list comes from a light import, which needs torch: the runtime tests' venv has it.
    venv_python="$("$PYTHON" tests/vllm_runtime.py | awk '{print $1}')" || die "no vLLM test environment"
    files="$(VLLM_LOGGING_LEVEL=ERROR PYTHONPATH="$repo" "$venv_python" tests/gpu/vllm_light.py "$work")" \
        || die "the light import of the rewritten tree failed"
    rm -rf "$bundle.partial"
    mkdir -p "$bundle.partial"
    (cd "$work" && printf '%s\n' $files | xargs cp --parents -t "$repo/$bundle.partial")
    rm -rf "$bundle"
    mv "$bundle.partial" "$bundle"
    grep -qxF "/$bundle/" .git/info/exclude 2>/dev/null || echo "/$bundle/" >> .git/info/exclude
    echo "gpu_check: $bundle holds $(printf '%s\n' $files | wc -l) modules ($(du -sh "$bundle" | cut -f1))" >&2

    # Prove the bundle is complete: the same tests, on the CPU, in light mode.
    "$venv_python" -c "import pytest" 2>/dev/null || "$venv_python" -m pip install --quiet pytest
    KVLINT_GPU_TEST_DEVICE=cpu KVLINT_GPU_VLLM_TREE="$repo/$bundle" VLLM_LOGGING_LEVEL=ERROR \
        PYTHONPATH="$repo" "$venv_python" -m pytest -q -m gpu tests/gpu -p no:cacheprovider
}

run() {
    local bundle="$1"
    [ -f "$bundle/vllm/__init__.py" ] || die "no bundle at $bundle: run '$0 prepare' where PyPI is reachable"
    "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
        || die "CUDA is not available to $PYTHON's torch"
    "$PYTHON" -c "import torch; print('gpu_check: torch', torch.__version__, 'on', torch.cuda.get_device_name())"
    KVLINT_GPU_VLLM_TREE="$repo/$bundle" VLLM_LOGGING_LEVEL=ERROR PYTHONPATH="$repo" \
        timeout "${GPU_CHECK_TIMEOUT:-280}" "$PYTHON" -m pytest -q -rs -m gpu tests/gpu -p no:cacheprovider
}

case "${1:-}" in
    prepare) prepare "${2:-.gpu-bundle}" ;;
    run) run "${2:-.gpu-bundle}" ;;
    -h|--help) sed -n '2,15p' "$0" ;;
    *) bundle="${1:-.gpu-bundle}"; prepare "$bundle"; run "$bundle" ;;
esac

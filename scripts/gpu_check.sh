#!/usr/bin/env bash
# Run kvlint's GPU tests (tests/gpu, marker `gpu`) on a CUDA machine, in under five minutes.
#
#   scripts/gpu_check.sh prepare [BUNDLE]   here, with PyPI and kvlint's dev environment:
#       take vLLM 0.29.0's sources, rewrite a copy with `kvlint fix`, keep only the ~40
#       modules the GPU tests import (vLLM's wheel is too large to carry), download the
#       wheels the tests need beyond torch (pytest, hypothesis, psutil, ...) for the GPU
#       machine's Python into BUNDLE/wheels, then dry-run `run` on the CPU here in a bare venv
#       (GPU_CHECK_BARE=1: torch's CPU wheel and the carried wheels, nothing else), in which
#       every GPU test must run (none skipped).
#       BUNDLE defaults to .gpu-bundle (git-excluded); carry it to the GPU machine.
#   scripts/gpu_check.sh run [BUNDLE]       on the GPU machine, with no network: a fresh venv that
#       sees PYTHON's packages (its torch, a CUDA build) plus what BUNDLE/wheels adds where PYTHON
#       lacks it, then the GPU tests against the bundle. Any skip fails (KVLINT_GPU_REQUIRED=1).
#   scripts/gpu_check.sh [BUNDLE]           both, where one machine has PyPI and a GPU.
#
# Environment: PYTHON (default python3) makes the venv; GPU_CHECK_PYTHON_VERSION (default 3.12,
# the GPU machine's python3) is the Python the carried wheels are for; GPU_CHECK_TIMEOUT (default
# 280 seconds) bounds the test run; KVLINT_GPU_TEST_DEVICE=cpu runs `run` on the CPU, installing
# torch's CPU wheel (tests/vllm_runtime.py's recipe) where PYTHON has no torch.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
PYTHON="${PYTHON:-python3}"
VLLM_VERSION=0.29.0
OFFLOADING_CONFIG=vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py
TARGET_PYTHON="${GPU_CHECK_PYTHON_VERSION:-3.12}"
# What tests/conftest.py, tests/gpu and the light import need beyond torch and kvlint (on PYTHONPATH).
TEST_WHEELS=(pytest hypothesis psutil regex packaging numpy)

die() { echo "gpu_check: $*" >&2; exit 2; }

# download_wheels FOLDER PYTHON_VERSION: TEST_WHEELS and their needs, as binary wheels for that Python.
download_wheels() {
    local folder="$1" version="$2"
    mkdir -p "$folder"
    "$PYTHON" -m pip download --quiet --only-binary=:all: --python-version "$version" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d "$folder" "${TEST_WHEELS[@]}" \
        || die "could not download the test wheels for Python $version"
}

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
    rm -rf "$work"
    trap - RETURN
    download_wheels "$bundle.partial/wheels" "$TARGET_PYTHON"
    rm -rf "$bundle"
    mv "$bundle.partial" "$bundle"
    local exclude
    exclude="$(git rev-parse --git-path info/exclude)"  # a worktree's .git is a file
    mkdir -p "$(dirname "$exclude")"
    for ignored in "/$bundle/" "/$bundle.local-wheels/"; do
        grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >> "$exclude"
    done
    echo "gpu_check: $bundle holds $(printf '%s\n' $files | wc -l) modules and $(ls "$bundle/wheels" | wc -l) wheels for Python $TARGET_PYTHON ($(du -sh "$bundle" | cut -f1))" >&2

    # Prove the bundle is complete: `run` itself, on the CPU, with wheels for this machine's Python too.
    local here
    here="$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    if [ "$here" != "$TARGET_PYTHON" ]; then
        download_wheels "$bundle.local-wheels" "$here"
    fi
    # In a venv of nothing but what run installs: torch's CPU wheel and the carried wheels.
    GPU_CHECK_BARE=1 KVLINT_GPU_TEST_DEVICE=cpu run "$bundle"
}

run() {
    local bundle="$1" scratch venv links status=0
    [ -f "$bundle/vllm/__init__.py" ] || die "no bundle at $bundle: run '$0 prepare' where PyPI is reachable"
    [ -d "$bundle/wheels" ] || die "no wheels in $bundle/wheels: run '$0 prepare' where PyPI is reachable"
    scratch="$(mktemp -d)"
    venv="$scratch/venv"
    # The machine's torch (a CUDA build on the GPU machine) shows through: PYTHON's own site folders go on
    # the fresh venv's path (PYTHON may itself be a venv, as the GPU machine's python3 is, whose packages
    # --system-site-packages alone would not show); a carried wheel installs only where PYTHON lacks it.
    # GPU_CHECK_BARE=1 (the CPU dry run of `prepare`): nothing of PYTHON's packages, every one from the wheels.
    if [ "${GPU_CHECK_BARE:-}" = 1 ]; then
        "$PYTHON" -m venv "$venv" || die "$PYTHON cannot make a venv"
    else
        "$PYTHON" -m venv --system-site-packages "$venv" || die "$PYTHON cannot make a venv"
        "$PYTHON" -c 'import site; print("\n".join([*site.getsitepackages(), site.getusersitepackages()]))' \
            > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/gpu_check_machine.pth"
    fi
    links=(--find-links "$bundle/wheels")
    [ -d "$bundle.local-wheels" ] && links+=(--find-links "$bundle.local-wheels")
    if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
        [ "${KVLINT_GPU_TEST_DEVICE:-}" = cpu ] || die "$PYTHON has no torch: the GPU machine's python3 must hold its CUDA build"
        local wheel
        wheel="$("$venv/bin/python" -c "import sys; sys.path.insert(0, 'tests'); import vllm_runtime; print(vllm_runtime.find_torch_cpu_wheel())")" \
            || die "no torch CPU wheel here for the CPU dry run (set KVLINT_TORCH_WHEEL)"
        echo "gpu_check: no torch in $PYTHON; installing the CPU wheel $(basename "$wheel") for the dry run" >&2
        "$venv/bin/python" -m pip install --quiet "$wheel" || die "could not install $wheel"
    fi
    "$venv/bin/python" -m pip install --quiet --no-index "${links[@]}" "${TEST_WHEELS[@]}" \
        || die "could not install the test wheels from $bundle/wheels (offline)"
    echo "gpu_check: the test venv sees $("$venv/bin/python" -m pip list --format=freeze 2>/dev/null \
        | grep -iE '^(torch|pytest|hypothesis|psutil|regex|packaging|numpy)==' | tr '\n' ' ')" >&2
    if [ "${KVLINT_GPU_TEST_DEVICE:-}" = cpu ]; then
        echo "gpu_check: CPU dry run (KVLINT_GPU_TEST_DEVICE=cpu)" >&2
    else
        "$venv/bin/python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
            || die "CUDA is not available to $PYTHON's torch"
    fi
    "$venv/bin/python" -c "import torch; print('gpu_check: torch', torch.__version__, 'on', torch.cuda.get_device_name() if torch.cuda.is_available() else 'the CPU')"
    KVLINT_GPU_REQUIRED=1 KVLINT_GPU_VLLM_TREE="$repo/$bundle" VLLM_LOGGING_LEVEL=ERROR PYTHONPATH="$repo" \
        timeout "${GPU_CHECK_TIMEOUT:-280}" "$venv/bin/python" -m pytest -q -rs -m gpu tests/gpu -p no:cacheprovider \
        || status=$?
    rm -rf "$scratch"
    return "$status"
}

case "${1:-}" in
    prepare) prepare "${2:-.gpu-bundle}" ;;
    run) run "${2:-.gpu-bundle}" ;;
    -h|--help) sed -n '2,20p' "$0" ;;
    *) bundle="${1:-.gpu-bundle}"; prepare "$bundle"; run "$bundle" ;;
esac

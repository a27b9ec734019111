#!/usr/bin/env bash
# Sets up a Debian 12 machine to develop rules_cuda_split with no internet but apt and PyPI:
#   1. apt packages: Go and the go.starlark.net sources, binutils, patchelf, CMake, Ninja;
#      then Bazel 7.7.1: a `bazel` of version 7 or later already on PATH is used as it is;
#      otherwise scripts/bazel_kit.py makes .cache/bazel-kit, Debian sid's bazel-bootstrap
#      7.7.1 relocated to run here with its own glibc and JVM while the actions run with
#      this machine's gcc and Python (docs/contributing.md, "Bazel"). Either way
#      .venv/bin/bazel is that Bazel;
#   2. the pinned CUDA wheels of scripts/cuda-wheels.txt, downloaded once into
#      .cache/cuda-wheels: Bazel's hermetic SDK (WORKSPACE, `@cuda`) reads them from there
#      (`--distdir`, below) instead of fetching them from PyPI again; and installed from
#      there into .sdk/ for the tests that run nvcc and the step runner outside Bazel (the
#      SDK is then .sdk/<SDK root>/{bin,nvvm,include,lib}, the SDK root inside the wheels
#      being nvidia/cu<major>: `python3 scripts/cuda_version_table.py --sdk-root`);
#   3. .venv/, this checkout's Python virtual environment: the dev tools of
#      scripts/requirements-dev.txt (pytest, ruff) and the project's console scripts
#      (nvcc-split, cuda-split; editable, from tools/ of this checkout). Nothing is
#      installed into the system interpreter: `source .venv/bin/activate` puts them on
#      PATH, or run .venv/bin/nvcc-split. (The Bazel actions need none of it: they run
#      the step runner, standard library only, with the python3 on the action's PATH.)
#   4. the generated block of .bazelrc.user, which points Bazel at the downloaded wheels;
#   5. .offline/bin/starlark, a Starlark interpreter built from tools/starlark/*.go.
# Idempotent: every step checks first and does nothing when already done, so a second
# run takes about a second. Run it from anywhere: `bash scripts/setup.sh`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OFFLINE="$ROOT/.offline"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
SDK_DIR="$ROOT/.sdk"
# The SDK root inside the default version's wheels (nvidia/cu<major>) and the SDK's
# directory in .sdk/: the version table's, set by find_sdk_root once .venv/ exists.
WHEEL_SDK_ROOT=""
CUDA_PATH_DIR=""
WHEELS="$ROOT/.cache/cuda-wheels"
APT_PACKAGES=(golang-go golang-starlark-dev binutils patchelf cmake ninja-build)
# In the checkout, unless the checkout is under /tmp: Bazel 7's sandbox gives each action a
# /tmp of its own, where the kit's install base (linked into every execroot) would vanish.
BAZEL_KIT="$ROOT/.cache/bazel-kit"
if [[ "$ROOT" == /tmp/* ]]; then
    BAZEL_KIT="/var/tmp/rules_cuda_split-bazel-kit-$(id -u)"
fi
GOCODE=/usr/share/gocode
# Running as root is what set-up does here; pip need not warn about it.
export PIP_ROOT_USER_ACTION=ignore

log() { printf 'setup.sh: %s\n' "$*" >&2; }
# shellcheck source=scripts/apt.sh
source "$ROOT/scripts/apt.sh"

# Writes stdin to $1 only when the content differs, so that unchanged files keep their
# mtime and Bazel does not refetch repositories that did not change.
write_if_changed() {
    local dest="$1" tmp
    tmp="$(mktemp)"
    cat >"$tmp"
    if [[ -f "$dest" ]] && cmp -s "$tmp" "$dest"; then
        rm -f "$tmp"
    else
        mkdir -p "$(dirname "$dest")"
        mv "$tmp" "$dest"
        chmod 0644 "$dest"
        log "wrote ${dest#"$ROOT"/}"
    fi
}

sha256_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

install_apt_packages() {
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$pkg")
    done
    # `python3 -m venv` needs ensurepip, which Debian ships apart from python3.
    if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip' 2>/dev/null; then
        missing+=(python3-venv)
    fi
    ((${#missing[@]} == 0)) && return 0
    apt_get_install "${APT_PACKAGES[@]}" "${missing[@]}"
}

# .venv/ from the python3 on PATH (3.11 or later); made again when that interpreter
# changes (a venv refers to its base interpreter by path).
make_venv() {
    local want
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
        log "error: python3 is $(python3 --version 2>&1); rules_cuda_split needs 3.11 or later"
        exit 1
    }
    want="$(python3 -c 'import sys; print(sys.version, sys.base_prefix)')"
    if [[ -x "$PY" && "$(cat "$VENV/.stamp" 2>/dev/null)" == "$want" ]]; then
        return 0
    fi
    log "making the virtual environment .venv/ ($(python3 --version))"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    echo "$want" >"$VENV/.stamp"
}

find_sdk_root() {
    WHEEL_SDK_ROOT="$("$PY" scripts/cuda_version_table.py --sdk-root)"
    CUDA_PATH_DIR="$SDK_DIR/$WHEEL_SDK_ROOT"
}

# The pinned wheels, as files: the same files (names and SHA-256) as the default version's
# entries of rules_cuda_split/private/repositories/cuda_versions.bzl. scripts/cuda-wheels.txt is
# generated from that table by scripts/cuda_version_table.py (tests/rules/test_sdk_version.py
# checks that it is current), so reading it here needs no network.
download_cuda_wheels() {
    local want stamp="$WHEELS/.stamp"
    want="$(sha256_of scripts/cuda-wheels.txt)"
    [[ "$(cat "$stamp" 2>/dev/null)" == "$want" ]] && return 0
    log "downloading the CUDA wheels of scripts/cuda-wheels.txt into .cache/cuda-wheels (about 560 MB)"
    mkdir -p "$WHEELS"
    # --no-deps: the requirements file is the complete, pinned set.
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps \
        --dest "$WHEELS" -r scripts/cuda-wheels.txt
    echo "$want" >"$stamp"
}

install_cuda_wheels() {
    local want stamp="$SDK_DIR/.stamp" partial="$ROOT/.cache/sdk-partial"
    want="$(sha256_of scripts/cuda-wheels.txt)"
    if [[ -x "$CUDA_PATH_DIR/bin/nvcc" && "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then
        return 0
    fi
    log "installing the CUDA wheels of .cache/cuda-wheels into .sdk/ (about 850 MB)"
    rm -rf "$partial"
    mkdir -p "$(dirname "$partial")"
    # From the downloaded files only (--no-index); --target does not touch the
    # interpreter's site-packages. Installed beside .sdk/ and moved in at the end, so an
    # interrupted run never leaves a half SDK behind a valid stamp.
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps --no-index \
        --find-links "$WHEELS" --target "$partial" -r scripts/cuda-wheels.txt
    [[ -x "$partial/$WHEEL_SDK_ROOT/bin/nvcc" ]] || {
        log "error: the wheels gave no $WHEEL_SDK_ROOT/bin/nvcc"
        exit 1
    }
    echo "$want" >"$partial/.stamp"
    rm -rf "$SDK_DIR"
    mv "$partial" "$SDK_DIR"
}

# gcc's `#pragma once` takes equal headers with equal mtimes for one file, and CCCL ships
# identical headers: with pip's install-time mtimes the .ii files depended on the install
# (docs/remote.md, "Three things used to differ"). One fixed mtime for the whole SDK.
SDK_MTIME=315532800 # 1980-01-01 00:00 UTC, the zip epoch
normalize_sdk_mtimes() {
    local dir="$1" other
    # Anything newer than SDK_MTIME or not newer than the second before it.
    other="$(find "$dir" \( -newermt "@$SDK_MTIME" -o ! -newermt "@$((SDK_MTIME - 1))" \) \
        -print -quit)"
    [[ -n "$other" ]] || return 0
    log "setting every mtime under ${dir#"$ROOT"/}/ to @$SDK_MTIME (gcc's #pragma once compares them)"
    find "$dir" -exec touch -h -d "@$SDK_MTIME" {} +
}

install_dev_tools() {
    # Fast path: every pinned distribution is already installed at its pinned version.
    if "$PY" - scripts/requirements-dev.txt <<'EOF'; then return 0; fi
import importlib.metadata as md, re, sys
for line in open(sys.argv[1]):
    m = re.match(r"\s*([A-Za-z0-9_.-]+)==(\S+)", line)
    if not m:
        continue
    try:
        if md.version(m.group(1)) != m.group(2):
            sys.exit(1)
    except md.PackageNotFoundError:
        sys.exit(1)
EOF
    log "installing the Python dev tools of scripts/requirements-dev.txt into .venv/"
    "$PY" -m pip install -q --disable-pip-version-check -r scripts/requirements-dev.txt
}

# The project's console scripts (nvcc-split, cuda-split) in .venv/bin, from this
# checkout's tools/ in place (editable: an edit needs no reinstall), with the `remote`
# extra (grpcio, protobuf, pinned in pyproject.toml) for nvcc-split --remote.
install_project() {
    local stamp="$VENV/.project.stamp" want
    want="$(sha256_of pyproject.toml) $ROOT"
    if [[ "$(cat "$stamp" 2>/dev/null)" == "$want" && -x "$VENV/bin/nvcc-split" ]] &&
        "$PY" -c 'import cuda_split, grpc, google.protobuf' 2>/dev/null; then
        return 0
    fi
    log "installing the cuda_split package into .venv/ (editable, with its remote extra)"
    # With dependencies: grpcio needs typing-extensions.
    "$PY" -m pip install -q --disable-pip-version-check -e ".[remote]"
    echo "$want" >"$stamp"
}

# The tools' bytecode, as a non-editable install writes it: every nvcc-split process
# imports cuda_split, and compiling its sources costs about 0.08 CPU s a compile where
# Python may not write bytecode itself (PYTHONDONTWRITEBYTECODE, a read-only checkout).
# Quick when it is current (compileall checks each source's mtime).
compile_tools() {
    "$PY" -m compileall -q tools/cuda_split >/dev/null
}

# The major version a `bazel` prints (`bazel 7.7.1` -> 7), 0 when it prints none.
bazel_major() {
    local out
    out="$("$1" --version 2>/dev/null | sed -n 's/^bazel \([0-9]*\).*/\1/p' | head -n 1)" || true
    echo "${out:-0}"
}

# .venv/bin/bazel: a bazel >= 7 found on PATH (outside .venv/), else the kit's.
install_bazel() {
    local found="" dir
    local IFS=:
    for dir in $PATH; do
        [[ -n "$dir" && "$dir" != "$VENV/bin" && -x "$dir/bazel" ]] || continue
        if (($(bazel_major "$dir/bazel") >= 7)); then
            found="$dir/bazel"
            break
        fi
    done
    unset IFS
    if [[ -z "$found" ]]; then
        found="$("$PY" scripts/bazel_kit.py kit --dir "$BAZEL_KIT")"
    fi
    if [[ "$(readlink "$VENV/bin/bazel" 2>/dev/null)" != "$found" ]]; then
        ln -sfn "$found" "$VENV/bin/bazel"
        log "bazel (.venv/bin/bazel): $found ($("$found" --version 2>/dev/null))"
    fi
}

# The generated block of .bazelrc.user; lines outside the markers are the developer's and
# are kept.
write_bazelrc_user() {
    local begin="# >>> written by scripts/setup.sh; edits inside this block are lost >>>"
    local end="# <<< written by scripts/setup.sh <<<"
    local block
    block="$begin"$'\n'
    block+="# Debian's /etc/bazel/bazelrc turns on --sandbox_debug (a Bazel from Debian's"$'\n'
    block+="# packages on PATH): a screen of linux-sandbox log per action, sandboxes kept."$'\n'
    block+="build --nosandbox_debug"$'\n'
    if [[ "$(stat -f -c %T /dev/shm 2>/dev/null)" == tmpfs ]]; then
        # Sandboxes of a few thousand symlinks (the SDK headers) take seconds to make
        # and remove on this disk, and milliseconds on tmpfs.
        block+="build --sandbox_base=/dev/shm"$'\n'
    fi
    block+="# The hermetic SDK's wheels (@cuda) and ggml's sdist (@ggml, once"$'\n'
    block+="# tests/support/corpus.py has it): Bazel takes a file it would download from"$'\n'
    block+="# here when the name and SHA-256 match, and reads no network."$'\n'
    block+="common --distdir=$WHEELS"$'\n'
    block+="common --distdir=$ROOT/.cache/corpus"$'\n'

    block+="$end"
    {
        if [[ -f .bazelrc.user ]]; then
            # Everything but an earlier generated block.
            awk -v b="$begin" -v e="$end" '
                $0 == b { skip = 1; next }
                $0 == e { skip = 0; next }
                !skip' .bazelrc.user
        fi
        printf '%s\n' "$block"
    } | write_if_changed .bazelrc.user
}

# buildifier (Starlark formatter), pinned, from the npm registry into .cache/node; the
# test suite checks every .bzl and BUILD file with it (tests/repo/test_format.py).
BUILDIFIER="@bazel/buildifier@8.2.1"
install_buildifier() {
    local dir="$ROOT/.cache/node"
    if [[ -x "$dir/node_modules/.bin/buildifier" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$BUILDIFIER" ]]; then
        return 0
    fi
    if ! command -v npm >/dev/null; then
        local sudo=()
        [[ "$(id -u)" == 0 ]] || sudo=(sudo)
        log "installing npm (for buildifier)"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y npm
    fi
    log "installing $BUILDIFIER into .cache/node"
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --silent "$BUILDIFIER" >/dev/null
    echo "$BUILDIFIER" >"$dir/.stamp"
}

build_starlark() {
    local out="$OFFLINE/bin/starlark" want
    want="$(sha256_of tools/starlark/*.go) $(go version)"
    if [[ -x "$out" && "$(cat "$out.stamp" 2>/dev/null)" == "$want" ]]; then
        return 0
    fi
    log "building .offline/bin/starlark from tools/starlark/*.go"
    mkdir -p "$OFFLINE/bin"
    # GOPATH mode: go.starlark.net comes from Debian's golang-starlark-dev sources,
    # nothing is downloaded.
    GO111MODULE=off GOPATH="$GOCODE" GOCACHE="$ROOT/.cache/go-build" GOFLAGS= \
        go build -o "$out" ./tools/starlark
    echo "$want" >"$out.stamp"
}

# --quick: only what the quick tier (`scripts/test.sh --quick`: tests that need no Bazel,
# no CUDA SDK and no REAPI backend) needs: the venv, the Starlark interpreter, buildifier.
if [[ "${1:-}" == "--quick" ]]; then
    install_apt_packages
    make_venv
    install_dev_tools
    install_project
    compile_tools
    build_starlark
    install_buildifier
    log "ready for the quick tier (scripts/test.sh --quick)"
    exit 0
elif [[ $# -gt 0 ]]; then
    log "unknown argument '$1'; accepted: --quick (set up only what the quick tier needs)"
    exit 2
fi

install_apt_packages
# --- REAPI test backend (tests/reapi/, scripts/reapi_backend.sh): postgresql-15 and
# BuildGrid in .cache/reapi-venv. Its own script, so that it can be run alone. Its apt
# packages now (one apt-get at a time); BuildGrid's pip install (about 70 packages, 20-40 s
# on a fresh machine, mostly waiting on the registry) beside the steps below.
bash "$ROOT/scripts/reapi_setup.sh" --apt
bash "$ROOT/scripts/reapi_setup.sh" --buildgrid &
buildgrid_pid=$!
# A step below that fails stops set-up: so does BuildGrid's install (pip, its child).
trap 'pkill -P "$buildgrid_pid" 2>/dev/null; kill "$buildgrid_pid" 2>/dev/null || true' EXIT
make_venv
find_sdk_root
download_cuda_wheels
install_cuda_wheels
normalize_sdk_mtimes "$SDK_DIR"
install_dev_tools
install_project
compile_tools
install_bazel
write_bazelrc_user
build_starlark
install_buildifier
trap - EXIT
wait "$buildgrid_pid" || {
    log "error: installing BuildGrid failed (its output is above); set-up is not complete"
    exit 1
}

log "ready (bazel: .venv/bin/bazel, $("$VENV/bin/bazel" --version); Bazel's SDK: @cuda from .cache/cuda-wheels; outside Bazel: CUDA_PATH=${CUDA_PATH_DIR#"$ROOT"/}; nvcc-split, cuda-split: source .venv/bin/activate)"

#!/usr/bin/env bash
# Installs what the REAPI backend of tests/reapi/ (and scripts/reapi_backend.sh) needs:
#   1. Debian's postgresql-15 (BuildGrid's scheduler database; the harness starts a private
#      cluster on 127.0.0.1, never the system service), and util-linux's unshare/setpriv;
#   2. BuildGrid and its dependencies, pinned in scripts/reapi-requirements.txt, in the
#      virtual environment .cache/reapi-venv (not the interpreter the tests run with).
# Idempotent: does nothing when both are in place. scripts/setup.sh runs it, in two parts
# (`--apt`, then `--buildgrid` beside its own steps: pip waits on the registry most of the
# time, and two apt-get runs at once would fight over dpkg's lock).
#
#   bash scripts/reapi_setup.sh               both
#   bash scripts/reapi_setup.sh --apt         only the apt packages (1.)
#   bash scripts/reapi_setup.sh --buildgrid   only BuildGrid's virtual environment (2.)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="${CUDA_SPLIT_REAPI_VENV:-$ROOT/.cache/reapi-venv}"
REQUIREMENTS=scripts/reapi-requirements.txt
PG_BIN=/usr/lib/postgresql/15/bin
export PIP_ROOT_USER_ACTION=ignore

log() { printf 'reapi_setup.sh: %s\n' "$*" >&2; }
# shellcheck source=scripts/apt.sh
source "$ROOT/scripts/apt.sh"

install_apt_packages() {
    local missing=()
    [[ -x "$PG_BIN/postgres" ]] || missing+=(postgresql-15)
    command -v unshare >/dev/null && command -v setpriv >/dev/null || missing+=(util-linux)
    # `python3 -m venv` needs ensurepip, which Debian ships apart.
    python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
    ((${#missing[@]} == 0)) && return 0
    apt_get_install "${missing[@]}"
}

install_buildgrid() {
    local want stamp="$VENV/.stamp"
    want="$(cat "$REQUIREMENTS" | sha256sum | cut -d' ' -f1) $(python3 --version)"
    if [[ -x "$VENV/bin/bgd" && "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then
        return 0
    fi
    log "installing BuildGrid (scripts/reapi-requirements.txt) into ${VENV#"$ROOT"/}"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    # --no-deps: the requirements file is the complete, pinned set.
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        -r "$REQUIREMENTS"
    "$VENV/bin/bgd" --help >/dev/null
    echo "$want" >"$stamp"
}

case "${1:-}" in
"") install_apt_packages && install_buildgrid ;;
--apt) install_apt_packages ;;
--buildgrid) install_buildgrid ;;
*)
    log "unknown argument '$1'; accepted: --apt, --buildgrid (or none: both)"
    exit 2
    ;;
esac

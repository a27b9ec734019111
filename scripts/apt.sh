# Sourced by setup.sh and reapi_setup.sh: apt_get_install PKG... installs Debian packages
# with apt-get (through sudo unless root), keeping any existing configuration, no prompt.
# The caller's log() says what is installed.
apt_get_install() {
    local sudo=()
    [[ "$(id -u)" == 0 ]] || sudo=(sudo)
    log "installing apt packages: $*"
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
        -o Dpkg::Options::=--force-confold "$@"
}

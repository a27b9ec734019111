#!/usr/bin/env bash
# Brings Debian's Bazel 4.2.3 to a machine that reaches no registry and has no Java (the
# GPU machine: Ubuntu, gcc, Python 3, CUDA at /usr/local/cuda), in two steps:
#
#   bash scripts/gpu_bazel.sh pack            here, after scripts/setup.sh: the .deb files
#       (Bazel, its rule packages, openjdk-17-jre-headless, the C++ libraries Debian's
#       Bazel client and sandbox link) into .cache/gpu-bazel/part-<N>/, each under the
#       64 MiB that one call to the GPU machine carries, plus this checkout's .offline/.
#   bash scripts/gpu_bazel.sh unpack [--prefix DIR] PART_DIR...
#                                             there, from the checkout: `dpkg -x` of every
#       .deb into DIR (default /tmp/gpu-bazel), then DIR/bin/bazel (Bazel with its install
#       base, Java and libraries from DIR) and this checkout's .bazelrc.user (the offline
#       rule repositories from DIR, the machine's SDK in place of the wheels).
#
# The parts can arrive in separate calls: copy each out of the checkout as it arrives, then
# unpack them all at once (docs/contributing.md, "Bazel on the GPU machine").
# Java libraries: Debian's A-server.jar bundles every class the server runs (it has no
# Class-Path), so none of the lib*-java packages are needed to build C++ and CUDA.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.cache/gpu-bazel"
# What one part may hold: the call's limit is 64 MiB for all it carries.
PART_LIMIT=$((56 * 1024 * 1024))
PACKAGES=(
    # Bazel: the client, its install base (A-server.jar, embedded tools) and the rule sets
    # Debian ships in place of the ones Bazel downloads.
    bazel-bootstrap bazel-bootstrap-data bazel-platforms bazel-rules-cc bazel-rules-java
    bazel-skylib
    # The server's Java.
    openjdk-17-jre-headless
    # Linked by the client (gRPC, protobuf) and by linux-sandbox and process-wrapper
    # (protobuf): Debian 12's sonames, which other distributions do not have.
    libabsl20220623 libc-ares2 libgrpc++1.51 libgrpc29 libprotobuf32 libprotoc32
)
SDK_DEFAULT=/usr/local/cuda

log() { printf 'gpu_bazel.sh: %s\n' "$*" >&2; }
die() {
    log "$*"
    exit 1
}

pack() {
    [[ -d "$ROOT/.offline/rules_cc" ]] || die "no .offline/rules_cc: run scripts/setup.sh first"
    local debs="$OUT/debs"
    rm -rf "$OUT" && mkdir -p "$debs"
    local pkg file
    for pkg in "${PACKAGES[@]}"; do
        # apt's cached .deb (setup.sh's download), else the candidate version downloaded.
        file="$(find /var/cache/apt/archives -maxdepth 1 -name "${pkg}_*.deb" | sort -V | tail -n 1)"
        if [[ -n "$file" ]]; then
            cp "$file" "$debs/"
        else
            log "downloading $pkg"
            (cd "$debs" && apt-get download -q "$pkg" >/dev/null 2>&1) ||
                die "apt-get download $pkg failed"
        fi
    done
    # Largest first into the first part with room (first-fit decreasing).
    local -a sizes=() names=()
    local n=0 size
    while read -r size file; do
        local part=1
        while ((${sizes[part]:-0} + size > PART_LIMIT)); do
            part=$((part + 1))
        done
        sizes[part]=$((${sizes[part]:-0} + size))
        mkdir -p "$OUT/part-$part"
        mv "$debs/$file" "$OUT/part-$part/"
        ((part > n)) && n=$part
    done < <(cd "$debs" && stat -c '%s %n' -- *.deb | sort -rn)
    rmdir "$debs"
    # .offline (rules_cc for Bazel 4.2.3, remote_coverage_tools) rides with the last part.
    cp -r "$ROOT/.offline/rules_cc" "$ROOT/.offline/remote_coverage_tools" "$OUT/part-$n/"
    # So does @ggml: the sdist (77 MB) is over one call's limit, so what ggml.BUILD reads
    # of it (ggml/, test-backend-ops.cpp), with that BUILD file, served by
    # --override_repository.
    local sdist="$ROOT/.cache/corpus/llama_cpp_python-0.3.36.tar.gz" tmp
    if [[ -f "$sdist" ]]; then
        tmp="$(mktemp -d)"
        tar -xzf "$sdist" -C "$tmp" --strip-components=3 \
            llama_cpp_python-0.3.36/vendor/llama.cpp/ggml \
            llama_cpp_python-0.3.36/vendor/llama.cpp/tests/test-backend-ops.cpp
        cp "$ROOT/examples/ggml/ggml.BUILD" "$tmp/BUILD.bazel"
        echo 'workspace(name = "ggml")' >"$tmp/WORKSPACE"
        tar -cJf "$OUT/part-$n/ggml.tar.xz" -C "$tmp" .
        rm -rf "$tmp"
    else
        log "no $sdist (python3 tests/support/corpus.py downloads it): @ggml is not packed"
    fi
    for part in $(seq 1 "$n"); do
        names+=("$(du -sh "$OUT/part-$part" | cut -f1) .cache/gpu-bazel/part-$part")
    done
    log "packed ${#PACKAGES[@]} packages into $n parts:"
    printf '  %s\n' "${names[@]}" >&2
}

# Extracts one .deb into $1 with dpkg, or with ar and tar where there is no dpkg.
extract_deb() {
    local deb="$1" prefix="$2"
    if command -v dpkg >/dev/null; then
        dpkg -x "$deb" "$prefix"
        return
    fi
    local member
    member="$(ar t "$deb" | grep '^data\.tar')"
    case "$member" in
    *.xz) ar p "$deb" "$member" | tar -xJ -C "$prefix" ;;
    *.zst) ar p "$deb" "$member" | tar --zstd -x -C "$prefix" ;;
    *) ar p "$deb" "$member" | tar -xz -C "$prefix" ;;
    esac
}

unpack() {
    local prefix=/tmp/gpu-bazel
    local -a parts=()
    while (($#)); do
        case "$1" in
        --prefix)
            prefix="${2:?--prefix needs a directory}"
            shift 2
            ;;
        *)
            parts+=("$1")
            shift
            ;;
        esac
    done
    ((${#parts[@]})) || die "unpack: name the part directories (.cache/gpu-bazel/part-<N>)"
    mkdir -p "$prefix"
    prefix="$(cd "$prefix" && pwd)"
    local part deb count=0
    for part in "${parts[@]}"; do
        [[ -d "$part" ]] || die "unpack: $part: no such directory"
        for deb in "$part"/*.deb; do
            [[ -e "$deb" ]] || continue
            extract_deb "$deb" "$prefix"
            count=$((count + 1))
        done
        if [[ -f "$part/ggml.tar.xz" ]]; then
            rm -rf "${prefix:?}/ggml" && mkdir -p "$prefix/ggml"
            tar -xJf "$part/ggml.tar.xz" -C "$prefix/ggml"
        fi
        for dir in rules_cc remote_coverage_tools; do
            if [[ -d "$part/$dir" ]]; then
                rm -rf "${prefix:?}/offline/$dir" && mkdir -p "$prefix/offline"
                cp -r "$part/$dir" "$prefix/offline/"
            fi
        done
    done
    local missing=()
    for need in usr/bin/bazel-4 usr/share/bazel/A-server.jar usr/lib/jvm/java-17-openjdk-amd64/bin/java \
        usr/lib/x86_64-linux-gnu/libprotobuf.so.32 offline/rules_cc; do
        [[ -e "$prefix/$need" ]] || missing+=("$need")
    done
    ((${#missing[@]} == 0)) || die "unpack: $prefix lacks ${missing[*]}: a part is missing"

    # Debian's absolute links (the JDK's conf/ into /etc/java-17-openjdk) point into the
    # prefix instead.
    local link target
    while IFS= read -r -d '' link; do
        target="$(readlink "$link")"
        ln -sfn "$prefix$target" "$link"
    done < <(find "$prefix" -type l -lname '/*' -print0)

    local libs="$prefix/usr/lib/x86_64-linux-gnu"
    local base="$prefix/usr/share/bazel"
    local java="$prefix/usr/lib/jvm/java-17-openjdk-amd64"
    # The sandbox and the process wrapper run every action: they find Debian's libraries
    # through the loader's own --library-path, so that no LD_LIBRARY_PATH reaches actions.
    local tool real loader=/lib64/ld-linux-x86-64.so.2
    for tool in linux-sandbox process-wrapper; do
        real="$prefix/usr/libexec/x86_64-linux-gnu/bazel/$tool"
        rm -f "$base/$tool"
        printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$loader" "$libs" "$real" \
            >"$base/$tool"
        chmod +x "$base/$tool"
    done
    mkdir -p "$prefix/bin"
    cat >"$prefix/bin/bazel" <<EOF
#!/bin/sh
# Debian's Bazel 4.2.3 unpacked by scripts/gpu_bazel.sh: its install base, Java and
# libraries from $prefix.
export JAVA_HOME="$java"
LD_LIBRARY_PATH="$libs" exec "$prefix/usr/bin/bazel-4" \\
    --install_base="$base" --trust_install_base --server_javabase="$java" "\$@"
EOF
    chmod +x "$prefix/bin/bazel"
    "$prefix/bin/bazel" --version >/dev/null || die "unpack: $prefix/bin/bazel --version failed"

    local sdk="${CUDA_SPLIT_LOCAL_SDK:-$SDK_DEFAULT}"
    [[ -x "$sdk/bin/nvcc" ]] || die "no $sdk/bin/nvcc: set CUDA_SPLIT_LOCAL_SDK to the SDK"
    # The C++ compiler: the gcc on PATH now, named, since Bazel's autodetection may find
    # another (the GPU machine's /opt/gcc/bin/gcc, whose libstdc++.so is a dangling link
    # that gold refuses).
    local cc
    cc="$(command -v gcc)" || die "no gcc on PATH"
    {
        echo "# Written by scripts/gpu_bazel.sh unpack for Bazel in $prefix."
        local cmd repo dir
        for cmd in build fetch query sync; do
            for repo in rules_cc=offline/rules_cc rules_java=usr/share/bazel/rules/java \
                platforms=usr/share/bazel/platforms bazel_skylib=usr/share/bazel/tools/skylib \
                remote_coverage_tools=offline/remote_coverage_tools; do
                dir="${repo#*=}"
                echo "$cmd --override_repository=${repo%%=*}=$prefix/$dir"
            done
            [[ -d "$prefix/ggml" ]] && echo "$cmd --override_repository=ggml=$prefix/ggml"
            # The machine's SDK (with cuBLAS) in place of the wheels, which stay here.
            echo "$cmd --repo_env=CUDA_SPLIT_LOCAL_SDK=$sdk"
            echo "$cmd --repo_env=CC=$cc"
        done
        echo "build --nosandbox_debug"
        echo "build --sandbox_base=/dev/shm"
    } >"$ROOT/.bazelrc.user"
    log "unpacked $count packages into $prefix; Bazel: $prefix/bin/bazel ($("$prefix/bin/bazel" --version)); SDK: $sdk"
}

case "${1:-}" in
pack) pack ;;
unpack)
    shift
    unpack "$@"
    ;;
*) die "usage: gpu_bazel.sh pack | unpack [--prefix DIR] PART_DIR..." ;;
esac

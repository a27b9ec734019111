#!/usr/bin/env bash
# Builds .device-kit/ here: what the device machine needs for issue 31's remote runs
# (benchmarks/scale_remote.sh) and cannot fetch, since it reaches no registry:
#   wheels/     BuildGrid and its dependencies, pinned in scripts/reapi-requirements.txt,
#               for the device's Python (3.12, manylinux x86-64)
#   pg.tar.gz   this machine's PostgreSQL 15 (Debian's: initdb, createdb, pg_ctl,
#               postgres, their modules and share files) with the shared libraries it
#               loads beyond glibc, and wrappers that point the loader at them
# Each travels in its own device call (`carry`): together with the ggml corpus they are
# over a call's 64 MiB. .gitignore names /.device-kit/.
#
#   bash benchmarks/device_kit.sh [--python-version 3.12]
set -euo pipefail
cd "$(dirname "$0")/.."
py=3.12
if [[ "${1:-}" == "--python-version" ]]; then py=${2:?--python-version X.Y}; fi
kit=.device-kit
pg_bin=/usr/lib/postgresql/15/bin
[[ -x $pg_bin/postgres ]] || { echo "device_kit.sh: no PostgreSQL 15 at $pg_bin (scripts/reapi_setup.sh installs it)" >&2; exit 1; }
rm -rf "$kit"
mkdir -p "$kit/wheels" "$kit/pg-root"

echo "device_kit.sh: wheels for Python $py" >&2
platforms=()
for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
    platforms+=(--platform "${p}_x86_64")
done
grep -v '^#' scripts/reapi-requirements.txt >"$kit/requirements.txt"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" \
    --implementation cp "${platforms[@]}" -d "$kit/wheels" -r "$kit/requirements.txt"

echo "device_kit.sh: PostgreSQL 15 from $pg_bin" >&2
root=$kit/pg-root
# The installation's own layout, so postgres finds its share directory relative to
# its binary (../../../share/postgresql/15), wherever the kit is unpacked.
mkdir -p "$root/usr/lib/postgresql/15/bin" "$root/usr/share/postgresql" "$root/libs" "$root/wrap"
for b in initdb createdb pg_ctl postgres; do cp -a "$pg_bin/$b" "$root/usr/lib/postgresql/15/bin/"; done
# Its modules (initdb loads plpgsql and dict_snowball), not the LLVM JIT.
cp -a /usr/lib/postgresql/15/lib "$root/usr/lib/postgresql/15/"
rm -rf "$root/usr/lib/postgresql/15/lib/bitcode" "$root"/usr/lib/postgresql/15/lib/llvmjit*
cp -a /usr/share/postgresql/15 "$root/usr/share/postgresql/"
for b in "$root"/usr/lib/postgresql/15/bin/*; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$root/libs/"; done
# postgres reads time zones from /usr/share/zoneinfo (Debian's --with-system-tzdata): the
# few scale_remote.sh installs where the device has none.
mkdir -p "$root/zoneinfo/Etc"
cp -L /usr/share/zoneinfo/UTC /usr/share/zoneinfo/GMT "$root/zoneinfo/"
cp -L /usr/share/zoneinfo/Etc/UTC "$root/zoneinfo/Etc/"
for b in initdb createdb pg_ctl postgres; do
    cat >"$root/wrap/$b" <<EOF
#!/bin/sh
# The kit's $b with the kit's libraries (pg_ctl and initdb pass them on to postgres).
here=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH=\$here/libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec "\$here/usr/lib/postgresql/15/bin/$b" "\$@"
EOF
    chmod 755 "$root/wrap/$b"
done
tar czf "$kit/pg.tar.gz" -C "$root" .
rm -rf "$root"
du -sh "$kit/wheels" "$kit/pg.tar.gz" >&2

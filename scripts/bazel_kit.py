"""Bazel 7.7.1 from Debian unstable's packages, unpacked to run on this machine's own system.

Debian unstable (sid) ships `bazel-bootstrap` 7.7.1, built against glibc 2.43 and libstdc++
16; Debian 12 has glibc 2.36 and cannot install it. This tool makes a *relocated kit*
instead of a root to chroot into:

1. `download`: a private apt configuration for sid (its own lists, no change to the host's
   apt) fetches the packages pinned in scripts/bazel-kit-packages.txt, exactly those
   versions; a version gone from the registry is an error that names it.
2. `unpack`: `dpkg -x` of each package into KIT/root, then
   - every ELF file there gets the kit's loader as its interpreter and the kit's library
     directories as its RPATH (patchelf), so the client, the JVM, the sandbox and the
     process wrapper run against the kit's glibc and libstdc++, while the actions they
     start (gcc, python3, nvcc) are the host's own and see nothing of the kit: no
     LD_LIBRARY_PATH, no chroot, linux-sandbox works;
   - absolute symbolic links (the JDK's conf/ into /etc) point into the kit;
   - the jars' manifests name their Class-Path relative to themselves, so that no jar of
     the host's /usr/share/java is loaded;
   - the server's class path file names the kit's jars;
   - Java trusts the host's certificates (/etc/ssl/certs/java/cacerts, else one made
     from /etc/ssl/certs/ca-certificates.crt);
   - KIT/bazelrc: Debian's module overrides pointing into the kit, stand-in modules for
     what Bazel's own module graph asks for and nothing here uses, an empty registry;
   - KIT/bin/bazel: the client with the kit's install base, JVM and rc file.

`kit` does both (what scripts/setup.sh runs); `check` says whether a kit is current. The
kit records the absolute directory it was made in (the loader path in each ELF header is
absolute): a moved checkout makes it again.

    python3 scripts/bazel_kit.py kit --dir .cache/bazel-kit
    python3 scripts/bazel_kit.py pack --dir .cache/bazel-kit --out DIR   (for another machine)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES_FILE = REPO / "scripts" / "bazel-kit-packages.txt"
# sid's index: the workplace's Debian mirror (the host's sources name it) with the suite
# replaced. The mirror's Release file is past its validity date: Check-Valid-Until off.
SUITE = "sid"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
LIBDIR = "usr/lib/x86_64-linux-gnu"
LOADER = f"{LIBDIR}/ld-linux-x86-64.so.2"
JAVA_HOME = "usr/lib/jvm/java-25-openjdk-amd64"
INSTALL_BASE = "usr/share/bazel"
# Modules that Bazel 7.7.1's own bazel_tools module asks for and nothing in a C++/CUDA
# build uses: each a local module of that name and version (buildozer's with the
# extension bazel_tools uses).
STAND_IN_MODULES = {
    "buildozer": "7.1.2",
    "protobuf": "3.19.6",
    "zlib": "1.3.1.bcr.3",
    "apple_support": "1.23.1",
}
# The kit's formats: a change of ROOT_FORMAT unpacks and patches the packages again, of
# KIT_FORMAT writes the rc file, the stand-ins and the wrapper again.
ROOT_FORMAT = "1"
KIT_FORMAT = "5"


def log(message: str) -> None:
    print(f"bazel_kit.py: {message}", file=sys.stderr, flush=True)


def die(message: str) -> None:
    log(f"error: {message}")
    sys.exit(1)


def read_packages(path: pathlib.Path = PACKAGES_FILE) -> list[tuple[str, str]]:
    """(name, version) pairs of the pin file: `name=version` lines, `#` comments."""
    pins = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("=")
        if not sep or not name or not version:
            die(f"{path.name}: '{raw}' is not name=version")
        pins.append((name, version))
    return pins


def host_mirror() -> str:
    """The Debian mirror the host's apt sources name (the workplace's registry)."""
    sources = pathlib.Path("/etc/apt/sources.list.d")
    texts = [p.read_text() for p in sorted(sources.glob("*")) if p.is_file()]
    legacy = pathlib.Path("/etc/apt/sources.list")
    if legacy.is_file():
        texts.append(legacy.read_text())
    for text in texts:
        for match in re.finditer(r"(?:URIs:|deb(?:\s+\[[^\]]*\])?)\s+(\S+/debian)\b", text):
            return match.group(1)
    return DEFAULT_MIRROR


class Apt:
    """apt-get and apt-cache over a private state directory that knows only sid."""

    def __init__(self, state: pathlib.Path) -> None:
        self.state = state
        for sub in ("lists/partial", "archives/partial", "etc/sources.list.d", "etc/apt.conf.d"):
            (state / sub).mkdir(parents=True, exist_ok=True)
        (state / "etc" / "preferences.d").mkdir(exist_ok=True)
        (state / "status").touch()
        (state / "etc" / "sources.list").write_text(
            f"deb [signed-by={KEYRING}] {host_mirror()} {SUITE} main\n"
        )
        conf = {
            "Dir::State": state,
            "Dir::State::Lists": state / "lists",
            "Dir::State::status": state / "status",
            "Dir::Cache": state,
            "Dir::Cache::archives": state / "archives",
            "Dir::Etc::sourcelist": state / "etc" / "sources.list",
            "Dir::Etc::sourceparts": state / "etc" / "sources.list.d",
            "Dir::Etc::preferencesparts": state / "etc" / "preferences.d",
            "Dir::Etc::parts": state / "etc" / "apt.conf.d",
            "APT::Architecture": "amd64",
            "Acquire::Check-Valid-Until": "false",
            "Acquire::Languages": "none",
        }
        (state / "apt.conf").write_text("".join(f'{k} "{v}";\n' for k, v in conf.items()))
        self.env = {**os.environ, "APT_CONFIG": str(state / "apt.conf")}

    def run(self, *args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(args), env=self.env, cwd=cwd, capture_output=True, text=True, check=False
        )

    def update(self) -> None:
        proc = self.run("apt-get", "update")
        if proc.returncode != 0:
            die(f"apt-get update for {SUITE} failed:\n{proc.stdout}{proc.stderr}")

    def available(self, name: str) -> set[str]:
        proc = self.run("apt-cache", "madison", name)
        return {line.split("|")[1].strip() for line in proc.stdout.splitlines() if "|" in line}


def download(kit: pathlib.Path, pins: list[tuple[str, str]]) -> pathlib.Path:
    """The pinned .deb files in KIT/debs (kept: a second run downloads nothing)."""
    debs = kit / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    wanted = {f"{n}_{v.replace(':', '%3a')}_" for n, v in pins}
    have = {p.name for p in debs.glob("*.deb")}
    missing_files = [
        (n, v)
        for n, v in pins
        if not any(h.startswith(f"{n}_{v.replace(':', '%3a')}_") for h in have)
    ]
    for stale in have:
        if not any(stale.startswith(w) for w in wanted):
            (debs / stale).unlink()
    if not missing_files:
        return debs
    log(f"downloading {len(missing_files)} of {len(pins)} packages of Debian {SUITE} (Bazel 7.7.1)")
    apt = Apt(kit / "apt")
    apt.update()
    gone = []
    for name, version in missing_files:
        if version not in apt.available(name):
            has = ", ".join(sorted(apt.available(name))) or "no version"
            gone.append(f"{name}={version} (the registry has {has})")
    if gone:
        die(
            f"Debian {SUITE} on {host_mirror()} no longer has these pinned packages of "
            f"{PACKAGES_FILE.relative_to(REPO)}:\n  "
            + "\n  ".join(gone)
            + "\nPin the versions the registry has (python3 scripts/bazel_kit.py pin), or "
            "put a bazel >= 7 on PATH: scripts/setup.sh then uses it."
        )
    proc = apt.run("apt-get", "download", *(f"{n}={v}" for n, v in missing_files), cwd=debs)
    if proc.returncode != 0:
        die(f"apt-get download failed:\n{proc.stdout}{proc.stderr}")
    return debs


def is_elf(path: pathlib.Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def patch_elf_files(root: pathlib.Path) -> int:
    """Loader and RPATH of every ELF file under root into the kit (see the docstring)."""
    loader = root / LOADER
    libdirs = [root / LIBDIR, root / JAVA_HOME / "lib", root / JAVA_HOME / "lib" / "server"]
    rpath_tail = ":".join(str(d) for d in libdirs)
    count = 0
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file() or not is_elf(path):
            continue
        if path.name.startswith(("ld-linux", "libc.so")) or path.suffix in (".o", ".a"):
            continue
        interp = subprocess.run(
            ["patchelf", "--print-interpreter", str(path)], capture_output=True, text=True
        )
        old = subprocess.run(
            ["patchelf", "--print-rpath", str(path)], capture_output=True, text=True
        )
        if old.returncode != 0:
            continue  # not a dynamic object (a static binary, a kernel module)
        cmd = ["patchelf", "--force-rpath", "--set-rpath"]
        # $ORIGIN entries stay first: the JDK finds its own libraries by them.
        keep = [e for e in old.stdout.strip().split(":") if e.startswith("$ORIGIN")]
        cmd.append(":".join([*keep, rpath_tail]))
        if interp.returncode == 0 and interp.stdout.strip():
            cmd += ["--set-interpreter", str(loader)]
        mode = path.stat().st_mode
        path.chmod(mode | 0o200)
        subprocess.run([*cmd, str(path)], check=True)
        path.chmod(mode)
        count += 1
    return count


def relink_absolute_symlinks(root: pathlib.Path) -> None:
    """Debian's absolute links (/etc/java-25-openjdk/..., /usr/share/...) into the kit."""
    for path in root.rglob("*"):
        if path.is_symlink():
            target = os.readlink(path)
            if target.startswith("/"):
                inside = root / target.lstrip("/")
                path.unlink()
                path.symlink_to(os.path.relpath(inside, path.parent))


def _manifest_class_path(text: str) -> tuple[str, str] | None:
    """(the Class-Path attribute's value, the manifest with it rewritten) or None."""
    lines = text.replace("\r\n", "\n").split("\n")
    # Unfold continuation lines (a leading space continues the previous line).
    logical: list[str] = []
    for line in lines:
        if line.startswith(" ") and logical:
            logical[-1] += line[1:]
        else:
            logical.append(line)
    for i, line in enumerate(logical):
        if line.lower().startswith("class-path:"):
            value = line.split(":", 1)[1].strip()
            entries = [
                e.rsplit("/", 1)[-1] if e.startswith("/usr/share/java/") else e
                for e in value.split()
            ]
            if all(not e.startswith("/") for e in value.split()):
                return None
            new = "Class-Path: " + " ".join(entries)
            # 72-byte lines, continuation lines start with a space.
            folded = [new[:72]] + [" " + new[j : j + 71] for j in range(72, len(new), 71)]
            logical[i : i + 1] = folded
            return value, "\r\n".join(logical)
    return None


def rewrite_manifests(root: pathlib.Path) -> int:
    """Absolute /usr/share/java Class-Path entries become relative (the same folder)."""
    count = 0
    for jar in sorted((root / "usr/share/java").glob("*.jar")):
        if jar.is_symlink():
            continue
        with zipfile.ZipFile(jar) as zf:
            try:
                manifest = zf.read("META-INF/MANIFEST.MF").decode("utf-8")
            except KeyError:
                continue
            rewritten = _manifest_class_path(manifest)
            if rewritten is None:
                continue
            tmp = jar.with_suffix(".jar.tmp")
            with zipfile.ZipFile(tmp, "w") as out:
                for info in zf.infolist():
                    data = zf.read(info)
                    if info.filename == "META-INF/MANIFEST.MF":
                        data = rewritten[1].encode("utf-8")
                    out.writestr(info, data)
        tmp.replace(jar)
        count += 1
    return count


def write_classpath(root: pathlib.Path) -> None:
    """The server's class path file (Debian's client reads it) naming the kit's jars."""
    path = root / INSTALL_BASE / "bazel_classpath_debian_depends.txt"
    lines = []
    for line in path.read_text().splitlines():
        jar = root / line.lstrip("/")
        if line.startswith("/") and jar.exists():
            lines.append(str(jar))
    path.write_text("\n".join(lines) + "\n")


def install_cacerts(root: pathlib.Path) -> None:
    """Java's trust store: the host's, so that downloads through this workplace's proxy
    are trusted (without it: `PKIX path building failed`)."""
    dest = root / "etc/ssl/certs/java/cacerts"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or dest.exists():
        dest.unlink()
    host = pathlib.Path("/etc/ssl/certs/java/cacerts")
    if host.is_file():
        shutil.copy2(host, dest)
        return
    bundle = pathlib.Path("/etc/ssl/certs/ca-certificates.crt")
    if not bundle.is_file():
        log("no /etc/ssl/certs/ca-certificates.crt: Bazel's downloads will not be trusted")
        return
    keytool = root / JAVA_HOME / "bin/keytool"
    pems = re.findall(
        r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", bundle.read_text(), re.S
    )
    with tempfile.TemporaryDirectory() as tmp:
        for i, pem in enumerate(pems):
            cert = pathlib.Path(tmp) / f"{i}.pem"
            cert.write_text(pem + "\n")
            subprocess.run(
                [
                    str(keytool),
                    "-importcert",
                    "-noprompt",
                    "-storetype",
                    "pkcs12",
                    "-keystore",
                    str(dest),
                    "-storepass",
                    "changeit",
                    "-alias",
                    f"host{i}",
                    "-file",
                    str(cert),
                ],
                capture_output=True,
                check=True,
            )


def write_stand_in_modules(kit: pathlib.Path) -> list[str]:
    flags = []
    for name, version in STAND_IN_MODULES.items():
        mod = kit / "modules" / name
        mod.mkdir(parents=True, exist_ok=True)
        text = (
            f"# A stand-in written by scripts/bazel_kit.py: Bazel's own module graph asks\n"
            f"# for {name}; nothing that rules_cuda_split builds uses it.\n"
            f'module(name = "{name}", version = "{version}")\n'
        )
        (mod / "BUILD.bazel").write_text("")
        if name == "buildozer":
            (mod / "buildozer.bzl").write_text(
                '"""The stand-in for buildozer\'s extension."""\n\n'
                "def _repo_impl(rctx):\n"
                '    rctx.file("BUILD.bazel", "")\n\n'
                "_repo = repository_rule(implementation = _repo_impl)\n\n"
                "def _impl(_mctx):\n"
                '    _repo(name = "buildozer_binary")\n\n'
                "buildozer_binary = module_extension(implementation = _impl)\n"
            )
        (mod / "MODULE.bazel").write_text(text)
        flags.append(f"common --override_module={name}={mod}")
    # `bazel query deps(...)` of a test and `bazel test` reach @remote_coverage_tools,
    # which Bazel downloads: a stand-in that has its two labels (coverage itself is not
    # available offline).
    cov = kit / "remote_coverage_tools"
    cov.mkdir(parents=True, exist_ok=True)
    (cov / "WORKSPACE").write_text('workspace(name = "remote_coverage_tools")\n')
    (cov / "unavailable.sh").write_text(
        "#!/bin/sh\necho 'remote_coverage_tools is an offline stand-in of scripts/bazel_kit.py:"
        " coverage is not available here.' >&2\nexit 1\n"
    )
    (cov / "unavailable.sh").chmod(0o755)
    (cov / "BUILD").write_text(
        "# The offline stand-in of scripts/bazel_kit.py.\n"
        'package(default_visibility = ["//visibility:public"])\n\n'
        'sh_binary(name = "coverage_report_generator", srcs = ["unavailable.sh"])\n\n'
        'sh_binary(name = "lcov_merger", srcs = ["unavailable.sh"])\n'
    )
    for name in (
        "bazel_tools~remote_coverage_tools_extension~remote_coverage_tools",
        "remote_coverage_tools",
    ):
        flags.append(f"common --override_repository={name}={cov}")
    registry = kit / "registry"
    registry.mkdir(exist_ok=True)
    (registry / "bazel_registry.json").write_text("{}\n")
    flags.append(f"common --registry=file://{registry}")
    return flags


def write_rc_and_wrapper(kit: pathlib.Path) -> pathlib.Path:
    root = kit / "root"
    debian_rc = (root / "etc/bazel/bazelrc").read_text()
    lines = [
        "# Written by scripts/bazel_kit.py: Bazel 7.7.1's rc file in place of Debian's",
        "# /etc/bazel/bazelrc (the client reads that path, this host's Bazel or none).",
        "# The rule sets Debian ships, in place of the ones Bazel would download:",
    ]
    overrides = [
        line.removeprefix("common --override_module=").split("=", 1)
        for line in debian_rc.splitlines()
        if line.startswith("common --override_module=")
    ]
    for name, path in overrides:
        lines.append(f"common --override_module={name}={root}{path}")
    lines.append("# The same for a WORKSPACE build (--enable_workspace --noenable_bzlmod).")
    for name, path in overrides:
        lines.append(f"common --override_repository={name}={root}{path}")
    lines += write_stand_in_modules(kit)
    (kit / "bazelrc").write_text("\n".join(lines) + "\n")
    bindir = kit / "bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "bazel"
    wrapper.write_text(
        "#!/bin/sh\n"
        "# Bazel 7.7.1 (Debian's bazel-bootstrap), unpacked by scripts/bazel_kit.py: the\n"
        "# kit's install base, JVM and rc file; ~/.bazelrc is read as Bazel reads it.\n"
        f'kit="{kit}"\n'
        'home_rc=""\n'
        'if [ -f "$HOME/.bazelrc" ]; then home_rc="--bazelrc=$HOME/.bazelrc"; fi\n'
        f'exec "$kit/root/usr/bin/bazel" --nosystem_rc --bazelrc="$kit/bazelrc" $home_rc \\\n'
        f'    --install_base="$kit/root/{INSTALL_BASE}" --trust_install_base \\\n'
        f'    --server_javabase="$kit/root/{JAVA_HOME}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def stamp_of(kit: pathlib.Path, pins: list[tuple[str, str]], fmt: str = "") -> str:
    digest = hashlib.sha256(json.dumps(pins).encode()).hexdigest()
    return f"{fmt or KIT_FORMAT} {digest} {kit}"


def make_kit(kit: pathlib.Path) -> pathlib.Path:
    kit = kit.resolve()
    pins = read_packages()
    stamp = kit / ".stamp"
    root_stamp = kit / ".root-stamp"
    wrapper = kit / "bin" / "bazel"
    if stamp.is_file() and stamp.read_text() == stamp_of(kit, pins) and wrapper.is_file():
        return wrapper
    root = kit / "root"
    # The unpacked packages are remade only when the pins, the way they are patched or
    # the directory change; the rc file, the stand-ins and the wrapper every time.
    want_root = stamp_of(kit, pins, ROOT_FORMAT)
    if not (root_stamp.is_file() and root_stamp.read_text() == want_root):
        if shutil.which("patchelf") is None:
            die("patchelf is not installed (apt-get install patchelf)")
        debs = download(kit, pins)
        staging = kit / "root.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        log(f"unpacking {len(pins)} packages into {kit.name}/root")
        for deb in sorted(debs.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(staging)], check=True)
        shutil.rmtree(root, ignore_errors=True)
        staging.rename(root)
        relink_absolute_symlinks(root)
        # Debian's install base links the sandbox and its helpers into /usr/libexec.
        n = patch_elf_files(root)
        m = rewrite_manifests(root)
        write_classpath(root)
        install_cacerts(root)
        log(f"patched {n} ELF files and {m} jar manifests")
        root_stamp.write_text(want_root)
    wrapper = write_rc_and_wrapper(kit)
    proc = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.startswith("bazel 7"):
        die(f"{wrapper} --version failed:\n{proc.stdout}{proc.stderr}")
    stamp.write_text(stamp_of(kit, pins))
    log(f"ready: {wrapper} ({proc.stdout.strip()})")
    return wrapper


def _jar_closure(root: pathlib.Path) -> set[pathlib.Path]:
    """The jars the server loads: its class path file's and, transitively, their
    manifests' Class-Path entries (symbolic links and their targets)."""
    java = root / "usr/share/java"
    todo = [
        pathlib.Path(line)
        for line in (root / INSTALL_BASE / "bazel_classpath_debian_depends.txt").read_text().split()
    ]
    seen: set[pathlib.Path] = set()
    while todo:
        jar = todo.pop()
        if jar in seen or not jar.exists():
            continue
        seen.add(jar)
        if jar.is_symlink():
            seen.add(jar.resolve())
        with zipfile.ZipFile(jar) as zf:
            try:
                text = zf.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
            except KeyError:
                continue
        unfolded = re.sub(r"\r?\n ", "", text)
        for line in unfolded.splitlines():
            if line.lower().startswith("class-path:"):
                todo += [java / e.rsplit("/", 1)[-1] for e in line.split(":", 1)[1].split()]
    return seen


def pack(kit: pathlib.Path, out: pathlib.Path, part_mib: int) -> list[pathlib.Path]:
    """What the kit runs with (no documentation, no .deb files, only the jars the server
    loads) as one .tar.xz cut into parts of at most part_mib MiB, for a machine that
    reaches no registry; there, `cat part-* | tar -xJ -C /` puts the kit back at the same
    absolute path (the ELF headers name it)."""
    kit = kit.resolve()
    root = kit / "root"
    jars = _jar_closure(root)
    members = [kit / "bazelrc", kit / ".stamp"]
    for sub in ("bin", "modules", "registry"):
        members += sorted(p for p in (kit / sub).rglob("*") if not p.is_dir())
    skip_dirs = {
        root / "usr/share/java",
        root / "usr/share/doc",
        root / "usr/share/man",
        root / "usr/share/maven-repo",
        root / "usr/include",
    }
    for path in sorted(root.rglob("*")):
        if any(d == path or d in path.parents for d in skip_dirs):
            continue
        if path.is_symlink() or not path.is_dir():
            members.append(path)
    members += sorted(jars)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("bazel-kit.tar.xz.part-*"):
        old.unlink()
    listing = out / "members.txt"
    listing.write_text("\n".join(str(m.relative_to("/")) for m in members) + "\n")
    log(f"packing {len(members)} files of {kit} (xz; a minute or two)")
    tar = subprocess.Popen(
        ["tar", "-c", "-C", "/", "--no-recursion", "-T", str(listing)], stdout=subprocess.PIPE
    )
    xz = subprocess.Popen(["xz", "-T0", "-6"], stdin=tar.stdout, stdout=subprocess.PIPE)
    subprocess.run(
        ["split", "-b", f"{part_mib}M", "-d", "-", str(out / "bazel-kit.tar.xz.part-")],
        stdin=xz.stdout,
        check=True,
    )
    if tar.wait() or xz.wait():
        die("tar or xz failed")
    listing.unlink()
    return sorted(out.glob("bazel-kit.tar.xz.part-*"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("command", choices=["kit", "check", "pack"])
    parser.add_argument("--dir", type=pathlib.Path, default=REPO / ".cache" / "bazel-kit")
    parser.add_argument("--out", type=pathlib.Path, help="pack: where the parts go")
    parser.add_argument("--part-mib", type=int, default=56, help="pack: the largest part")
    parser.add_argument(
        "--debs", type=pathlib.Path, help="kit: take the .deb files from here when they are there"
    )
    args = parser.parse_args(argv)
    if args.command == "pack":
        if args.out is None:
            parser.error("pack needs --out DIR")
        for part in pack(args.dir, args.out, args.part_mib):
            print(part)
        return 0
    if args.command == "check":
        stamp = args.dir.resolve() / ".stamp"
        ok = stamp.is_file() and stamp.read_text() == stamp_of(args.dir.resolve(), read_packages())
        return 0 if ok else 1
    if args.debs is not None and args.debs.resolve() != (args.dir.resolve() / "debs"):
        (args.dir / "debs").mkdir(parents=True, exist_ok=True)
        for deb in args.debs.glob("*.deb"):
            shutil.copy2(deb, args.dir / "debs" / deb.name)
    print(make_kit(args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

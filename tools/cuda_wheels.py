"""The table of NVIDIA's CUDA wheels, rules_cuda_split/private/repositories/cuda_versions.bzl:
how it is built, written and read (the library; scripts/cuda_version_table.py is its command).

For each CUDA version in RELEASES and each component of COMPONENTS (the default set:
nvcc, nvvm, crt, cudart, cccl, the profiler API and NVTX; then the opt-in libraries), the
table holds the PyPI wheel's URL, SHA-256, size and the directory inside it that is the
SDK root, per Linux platform (`linux-x86_64`, `linux-sbsa` for aarch64), as
`cuda_wheel_sdk_repository` reads it. Nothing in it is
written by hand:

- the component versions are those NVIDIA's `cuda-toolkit` meta-package of the release
  pins (its `Requires-Dist`, read from the wheel `pip download --no-deps` fetches), with
  the few overrides RELEASES names;
- the files, URLs, SHA-256 and sizes come from PyPI's JSON API
  (`https://pypi.org/pypi/<name>/json`, its `releases`);
- the SDK root inside each wheel (`nvidia/cu<major>`) is read from the wheel's zip
  directory with HTTP range requests, which also checks that the compiler wheel holds
  `bin/nvcc`: PyPI's CUDA 12 `nvidia-cuda-nvcc-cu12` wheels hold only ptxas and libnvvm,
  so no CUDA 12 release can be assembled from PyPI and the script refuses one.

It also writes scripts/cuda-wheels.txt, the wheels scripts/setup.sh downloads: the pins of
DEFAULT_VERSION's default set and SETUP_COMPONENTS, and the TEST_TOOLS; and the same list
of every other version, scripts/cuda-wheels-<version>.txt, for building offline. DEFAULT_VERSION is
the one place that names the default version: the table carries it to the Starlark rules,
and this module is its Python mirror (`default_version()`, `sdk_root()`,
`checkout_sdk()` read the checked-in table; `--sdk-root` prints it for shell scripts).

Usage: `python3 scripts/cuda_version_table.py` (rewrites the table and cuda-wheels.txt;
needs PyPI), `--check` (exit 1 when either is stale; needs PyPI), `--wheels [VERSION]`
(prints a version's setup list from the checked-in table), `--sdk-root [VERSION]` (prints
the SDK root inside its wheels, `nvidia/cu<major>`, from the checked-in table).
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import functools
import io
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[1]
TABLE = REPO / "rules_cuda_split" / "private" / "repositories" / "cuda_versions.bzl"
WHEELS_TXT = REPO / "scripts" / "cuda-wheels.txt"
PYPI_JSON = "https://pypi.org/pypi/{name}/json"
FILES_HOST = "https://files.pythonhosted.org/packages/"

# The version a build gets when it names none (the rules' default: repositories.bzl and
# extensions.bzl load it from the table) and the one scripts/setup.sh installs.
DEFAULT_VERSION = "13.0"

# CUDA version -> the cuda-toolkit release that pins its components, and overrides
# (component -> exact version). 13.0: cuBLAS 13.0.2.14 (cuda-toolkit 13.0.2 names
# 13.1.0.3), the cuBLAS this repository was developed with.
RELEASES: dict[str, dict[str, object]] = {
    "13.0": {"toolkit": "13.0.2", "overrides": {"cublas": "13.0.2.14"}},
    "13.2": {"toolkit": "13.2.2", "overrides": {}},
    "13.5": {"toolkit": "13.5.0", "overrides": {}},
}

# Component -> (PyPI package, the components it needs at link time). The names are the
# cuda-toolkit meta-package's extras (`cuda-toolkit[cusolver]`).
COMPONENTS: dict[str, tuple[str, list[str]]] = {
    "nvcc": ("nvidia-cuda-nvcc", []),
    "nvvm": ("nvidia-nvvm", []),
    "crt": ("nvidia-cuda-crt", []),
    "cudart": ("nvidia-cuda-runtime", []),
    "cccl": ("nvidia-cuda-cccl", []),
    # cuda_profiler_api.h, cudaProfiler.h (cudart's cudaProfilerTypedefs.h includes it).
    "profiler": ("nvidia-cuda-profiler-api", []),
    # NVTX 3: include/nvtx3/, header-only (it finds its tool at run time with dlopen).
    "nvtx": ("nvidia-nvtx", []),
    "cublas": ("nvidia-cublas", []),
    "cufft": ("nvidia-cufft", ["nvjitlink"]),
    "curand": ("nvidia-curand", []),
    "cusparse": ("nvidia-cusparse", ["nvjitlink"]),
    # cuSOLVER links against cuBLAS, cuSPARSE and nvJitLink: cuda-toolkit 13.2's and
    # 13.5's extra `cusolver` pins their wheels with it, and its headers include theirs
    # (cusolverDn.h: cublas_v2.h; tests/rules/test_sdk_headers.py fails without them).
    "cusolver": ("nvidia-cusolver", ["cublas", "cusparse", "nvjitlink"]),
    "cupti": ("nvidia-cuda-cupti", []),
    "nvrtc": ("nvidia-cuda-nvrtc", []),
    "nvjitlink": ("nvidia-nvjitlink", []),
    # tileiras (bin/tileiras): nvcc's tile compiler (--enable-tile, --tile-only; 13.5's
    # nvcc has them). cuda-toolkit 13.2 and 13.5 pin a wheel of it, 13.0 none.
    "tileiras": ("nvidia-cuda-tileiras", []),
}
# What a classic toolkit's include/ holds for the compiler and the runtime, and its
# compiler's tools.
DEFAULT_COMPONENTS = ["nvcc", "nvvm", "crt", "cudart", "cccl", "profiler", "nvtx", "tileiras"]

# Components that only newer releases have: a release whose cuda-toolkit pins none of
# them has no entry (tileiras: not 13.0). Any other component must be pinned.
NEWER_COMPONENTS = {"tileiras"}

# The opt-in components of this repository's own SDK (WORKSPACE, MODULE.bazel):
# scripts/setup.sh downloads their wheels with the default set's.
SETUP_COMPONENTS = ["cublas"]

# Tools the tests run that no compile needs (cuobjdump lists a fatbinary's images), by the
# cuda-toolkit extra that pins them -> PyPI package. A release whose cuda-toolkit pins none
# (13.0) gets, in its setup list, the next release's: a newer cuobjdump reads older objects.
TEST_TOOLS: dict[str, str] = {"cuobjdump": "nvidia-cuda-cuobjdump"}

# Wheel platform tag -> NVIDIA's platform name (redistrib JSON's keys).
PLATFORMS = {"x86_64": "linux-x86_64", "aarch64": "linux-sbsa"}

_REQ = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*([^;]*)")


def parse_requires(metadata: str) -> dict[str, str]:
    """Package -> version spec (`==13.0.88.*`, `<14,>=13.2.86`) of Requires-Dist lines."""
    msg = email.parser.Parser().parsestr(metadata)
    out: dict[str, str] = {}
    for line in msg.get_all("Requires-Dist") or []:
        m = _REQ.match(line)
        if m:
            out.setdefault(m.group(1).lower(), m.group(2).strip())
    return out


def _key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def resolve_version(spec: str, releases: list[str]) -> str:
    """The exact release a spec means: `==X.*` the newest X or X.n; `>=X` the release X."""
    for part in spec.split(","):
        part = part.strip()
        if part.startswith("=="):
            prefix = part[2:].removesuffix(".*")
            matches = [r for r in releases if r == prefix or r.startswith(prefix + ".")]
            if matches:
                return max(matches, key=_key)
        if part.startswith(">=") and part[2:] in releases:
            return part[2:]
    raise ValueError(f"no release matches {spec!r} among {sorted(releases, key=_key)[-5:]}")


def canonical_url(url: str) -> str:
    """PyPI's file URL on files.pythonhosted.org (mirrors answer with relative URLs)."""
    m = re.search(r"([0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}/[^/]+)$", url)
    if not m:
        raise ValueError(f"not a PyPI file URL: {url}")
    return FILES_HOST + m.group(1)


def wheel_platform(filename: str) -> str | None:
    """`linux-x86_64`/`linux-sbsa` for a manylinux wheel, None for others."""
    if "linux" not in filename:
        return None
    for tag, name in PLATFORMS.items():
        if filename.endswith(f"_{tag}.whl"):
            return name
    return None


def sdk_root(names: list[str]) -> str:
    """The SDK root inside a wheel: the one `nvidia/<dir>` its files lie under."""
    roots = {
        "/".join(n.split("/")[:2])
        for n in names
        if n.startswith("nvidia/") and n.count("/") >= 2 and not n.endswith("__init__.py")
    }
    if len(roots) != 1:
        raise ValueError(f"expected one nvidia/<dir> root, found {sorted(roots)}")
    return roots.pop()


class _HttpFile(io.RawIOBase):
    """A remote file read with HTTP range requests (enough for zipfile's directory)."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def readinto(self, buf) -> int:  # type: ignore[no-untyped-def]
        if self.pos >= self.size:
            return 0
        end = min(self.size, self.pos + len(buf)) - 1
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        data = _read_with_retries(req)
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


RETRIES = 4


def _read_with_retries(req: urllib.request.Request) -> bytes:
    """The response body of `req`, trying again (after 1, 2, 4 s) when the connection
    fails or the server errs (5xx): one dropped range request of hundreds should not fail
    a table update or a test."""
    for attempt in range(RETRIES):
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.read()
        except (OSError, urllib.error.URLError) as e:
            server_error = isinstance(e, urllib.error.HTTPError) and e.code >= 500
            if attempt == RETRIES - 1 or (
                isinstance(e, urllib.error.HTTPError) and not server_error
            ):
                raise
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


def wheel_names(url: str, size: int) -> list[str]:
    with zipfile.ZipFile(io.BufferedReader(_HttpFile(url, size), 1 << 16)) as z:
        return z.namelist()


def _pypi(name: str) -> dict:
    with urllib.request.urlopen(PYPI_JSON.format(name=name), timeout=120) as resp:
        return json.load(resp)


def pip_download(requirement: str, dest: str) -> None:
    """`pip download` of the one wheel `requirement` names (no dependencies) into `dest`."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", requirement, "-d", dest],
        check=True,
    )


def toolkit_requires(version: str) -> dict[str, str]:
    """The cuda-toolkit meta-package's pins, from the wheel pip downloads."""
    with tempfile.TemporaryDirectory() as tmp:
        pip_download(f"cuda-toolkit=={version}", tmp)
        (wheel,) = pathlib.Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            return parse_requires(z.read(meta).decode())


def component_entry(package: str, version: str, requires: list[str]) -> dict:
    releases = _pypi(package)["releases"]
    platforms = {}
    for f in releases.get(version, []):
        platform = wheel_platform(f["filename"])
        if platform is None:
            continue
        url = canonical_url(urllib.parse.urljoin(PYPI_JSON.format(name=package), f["url"]))
        platforms[platform] = {
            "url": url,
            "sha256": f["digests"]["sha256"],
            "size": f["size"],
            "strip_prefix": sdk_root(wheel_names(url, f["size"])),
            "type": "zip",
        }
    if not platforms:
        raise ValueError(f"{package} {version}: no Linux wheel on PyPI")
    return {"package": package, "version": version, "requires": requires, "platforms": platforms}


def build_table() -> dict:
    table: dict[str, dict] = {}
    for cuda, release in RELEASES.items():
        pins = toolkit_requires(str(release["toolkit"]))
        overrides = dict(release["overrides"])  # type: ignore[arg-type]
        components = {}
        for name, (package, requires) in COMPONENTS.items():
            if name in NEWER_COMPONENTS and name not in overrides and package not in pins:
                print(f"{cuda} {name}: none (cuda-toolkit pins no {package})", file=sys.stderr)
                continue
            if name not in overrides and package not in pins:
                raise ValueError(
                    f"CUDA {cuda}: cuda-toolkit {release['toolkit']} pins no {package} "
                    f"({name}); pin it in RELEASES' overrides or leave the component out"
                )
            releases = list(_pypi(package)["releases"])
            version = overrides.get(name) or resolve_version(pins[package], releases)
            components[name] = component_entry(package, version, requires)
            print(f"{cuda} {name}: {package}=={version}", file=sys.stderr)
        for platform, entry in components["nvcc"]["platforms"].items():
            names = wheel_names(entry["url"], entry["size"])
            if entry["strip_prefix"] + "/bin/nvcc" not in names:
                raise ValueError(f"CUDA {cuda} {platform}: the nvcc wheel has no bin/nvcc")
        tools = {}
        for name, package in TEST_TOOLS.items():
            if package in pins:
                version = resolve_version(pins[package], list(_pypi(package)["releases"]))
                tools[name] = {"package": package, "version": version}
        table[cuda] = {"toolkit": release["toolkit"], "components": components, "tools": tools}
    return table


def starlark_literal(value: object, indent: int = 0) -> str:
    """`value` (dicts, lists, strings, ints) as buildifier writes it: one item a line,
    trailing commas, dict keys sorted."""
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [
            f"{pad}{json.dumps(k)}: {starlark_literal(value[k], indent + 4)},\n"
            for k in sorted(value)
        ]
        return "{\n" + "".join(items) + " " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [f"{pad}{starlark_literal(v, indent + 4)},\n" for v in value]
        return "[\n" + "".join(items) + " " * indent + "]"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"no Starlark literal for {value!r}")
    return json.dumps(value)


def render(table: dict) -> str:
    return (
        '"""NVIDIA\'s CUDA wheels on PyPI, per CUDA version, component and platform.\n\n'
        "Generated by scripts/cuda_version_table.py; do not edit.\n"
        '"""\n\n'
        f"DEFAULT_COMPONENTS = {json.dumps(DEFAULT_COMPONENTS)}\n\n"
        f"DEFAULT_VERSION = {json.dumps(DEFAULT_VERSION)}\n\n"
        f"CUDA_VERSIONS = {starlark_literal(table)}\n"
    )


def parse_table(text: str) -> dict:
    """The CUDA_VERSIONS dict of a rendered table (a Python literal after the `=`)."""
    return ast.literal_eval(text.split("CUDA_VERSIONS = ", 1)[1])


@functools.cache
def checked_in_table() -> dict:
    """The checked-in table's CUDA_VERSIONS (read once)."""
    return parse_table(TABLE.read_text())


def _known(table: dict, version: str) -> dict:
    if version not in table:
        raise ValueError(f"CUDA {version} is not in the table (it has {', '.join(table)})")
    return table[version]


def version_sdk_root(version: str = DEFAULT_VERSION, table: dict | None = None) -> str:
    """The SDK root inside a version's wheels (`nvidia/cu<major>`): the one `strip_prefix`
    of all its components' wheels."""
    entry = _known(table or checked_in_table(), version)
    roots = {
        f["strip_prefix"]
        for comp in entry["components"].values()
        for f in comp["platforms"].values()
    }
    if len(roots) != 1:
        raise ValueError(f"CUDA {version}: the wheels have several SDK roots: {sorted(roots)}")
    return roots.pop()


def checkout_sdk(repo: pathlib.Path = REPO) -> pathlib.Path:
    """The SDK scripts/setup.sh installs into a checkout: the default version's wheels,
    installed with `pip install --target <repo>/.sdk`."""
    return repo / ".sdk" / version_sdk_root()


def _with_requires(components: dict, names: list[str]) -> list[str]:
    out: list[str] = []
    todo = list(names)
    while todo:
        name = todo.pop(0)
        if name not in out:
            out.append(name)
            todo.extend(components[name]["requires"])
    return out


def setup_wheels(table: dict, version: str = DEFAULT_VERSION) -> str:
    """scripts/cuda-wheels.txt for `version`: its default set's and SETUP_COMPONENTS' pins
    (with what they require), then the TEST_TOOLS (the oldest release at or after
    `version` whose cuda-toolkit pins the tool)."""
    entry = _known(table, version)
    components = entry["components"]
    lines = [
        f"# Pinned CUDA {version} components as PyPI wheels: scripts/setup.sh downloads them into",
        "# .cache/cuda-wheels (where Bazel's hermetic SDK, @cuda, finds them through"
        " --distdir) and",
        "# installs them from there into .sdk/ for the tests that run nvcc outside Bazel; together",
        f"# they form the SDK at .sdk/{version_sdk_root(version, table)}/{{bin,nvvm,include,lib}}.",
    ]
    if version != DEFAULT_VERSION:
        lines = [
            f"# Pinned CUDA {version} components as PyPI wheels (generated with the version table",
            "# by scripts/cuda_version_table.py), for building with this version offline:",
            f"# `pip download --no-deps -r scripts/{wheels_txt(version).name} -d DIR`, then",
            "# Bazel's --distdir=DIR (docs/sdk.md, Offline). It holds the default set and cuBLAS;",
            "# other opt-in components' pins are in",
            "# rules_cuda_split/private/repositories/cuda_versions.bzl.",
        ]
    wanted = [c for c in [*DEFAULT_COMPONENTS, *SETUP_COMPONENTS] if c in components]
    for name in _with_requires(components, wanted):
        lines.append(f"{components[name]['package']}=={components[name]['version']}")
    for tool in TEST_TOOLS:
        newer = [v for v in table if _key(v) >= _key(version) and tool in table[v]["tools"]]
        if not newer:
            raise ValueError(f"no CUDA release from {version} on pins a {tool} wheel")
        source = min(newer, key=_key)
        pin = table[source]["tools"][tool]
        lines.append(f"# {tool}, for the tests (listing a fatbinary's images).")
        if source != version:
            lines[-1] += f" NVIDIA publishes no {version}"
            lines.append(f"# wheel of it; {source}'s reads {version} objects.")
            lines[-1] += " It is not part of the compile toolchain."
        else:
            lines.append("# It is not part of the compile toolchain.")
        lines.append(f"{pin['package']}=={pin['version']}")
    return "\n".join(lines) + "\n"


def wheels_txt(version: str) -> pathlib.Path:
    """A version's wheel list: scripts/cuda-wheels.txt for the default version (what
    scripts/setup.sh downloads), scripts/cuda-wheels-<version>.txt for the others."""
    if version == DEFAULT_VERSION:
        return WHEELS_TXT
    return WHEELS_TXT.with_name(f"cuda-wheels-{version}.txt")


def wheel_lists(table: dict) -> dict[pathlib.Path, str]:
    """Every version's wheel list (wheels_txt) and its text (setup_wheels)."""
    return {wheels_txt(version): setup_wheels(table, version) for version in table}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/cuda_version_table.py",
        description="Write rules_cuda_split/private/repositories/cuda_versions.bzl, the table "
        "of NVIDIA's CUDA wheels.",
    )
    parser.add_argument(
        "--check", action="store_true", help="fail when the table or cuda-wheels.txt is stale"
    )
    parser.add_argument("--out", type=pathlib.Path, default=TABLE)
    parser.add_argument("--wheels-out", type=pathlib.Path, default=WHEELS_TXT)
    parser.add_argument(
        "--wheels",
        nargs="?",
        const=DEFAULT_VERSION,
        metavar="VERSION",
        help="print a version's setup list (default version: %(const)s) and exit",
    )
    parser.add_argument(
        "--sdk-root",
        nargs="?",
        const=DEFAULT_VERSION,
        metavar="VERSION",
        help="print the SDK root inside a version's wheels and exit",
    )
    args = parser.parse_args(argv)
    try:
        if args.wheels:
            sys.stdout.write(setup_wheels(checked_in_table(), args.wheels))
            return 0
        if args.sdk_root:
            print(version_sdk_root(args.sdk_root))
            return 0
    except ValueError as e:
        parser.error(str(e))
    table = build_table()
    outputs = {args.out: render(table), **wheel_lists(table)}
    outputs[args.wheels_out] = outputs.pop(WHEELS_TXT)
    if args.check:
        stale = [path for path, text in outputs.items() if path.read_text() != text]
        for path in stale:
            print(f"{path} is stale: run scripts/cuda_version_table.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text)
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

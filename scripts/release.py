"""Make the source archive of a release and print its `integrity` (docs/releasing.md).

The archive is `git archive` of a commit under the prefix `rules_cuda_split-VERSION/`,
gzip-compressed with no name and no timestamp in its header: the same commit gives the
same bytes (git writes the commit's time as every file's mtime), so the integrity printed
here is the one the BCR's source.json will hold.

Usage:

    python3 scripts/release.py                    # HEAD, MODULE.bazel's version, into dist/
    python3 scripts/release.py --ref v0.1.0 --out /tmp/release

It prints the archive's path, its `integrity` (`sha256-<base64>`, what source.json and
`archive_override` take) and `strip_prefix`. It fails when MODULE.bazel at the commit
names another version than `--version`, or when the working tree differs from the commit
being archived (`--allow-dirty` to archive the commit all the same).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
NAME = "rules_cuda_split"
_VERSION = re.compile(r'(?s)\bmodule\s*\(.*?\bversion\s*=\s*"([^"]+)"')


def _git(*args: str, repo: pathlib.Path) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def module_version(module_bazel: str) -> str:
    """The version MODULE.bazel's module() names."""
    m = _VERSION.search(module_bazel)
    if not m:
        raise ValueError("MODULE.bazel's module() names no version")
    return m.group(1)


def integrity(data: bytes) -> str:
    """Subresource Integrity of `data`, as Bazel and the BCR write it."""
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def archive(repo: pathlib.Path, ref: str, version: str) -> bytes:
    """The gzip-compressed tar of commit `ref` under `rules_cuda_split-VERSION/`."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}", repo=repo).decode().strip()
    tar = _git("archive", "--format=tar", f"--prefix={NAME}-{version}/", commit, repo=repo)
    # mtime=0 and no file name: the header holds nothing of this run.
    return gzip.compress(tar, compresslevel=9, mtime=0)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", default="HEAD", help="the commit or tag (default: HEAD)")
    parser.add_argument("--version", help="default: MODULE.bazel's at --ref")
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "dist")
    parser.add_argument("--repo", type=pathlib.Path, default=REPO, help=argparse.SUPPRESS)
    parser.add_argument(
        "--allow-dirty", action="store_true", help="archive --ref though the tree differs"
    )
    args = parser.parse_args(argv)
    try:
        at_ref = module_version(_git("show", f"{args.ref}:MODULE.bazel", repo=args.repo).decode())
    except subprocess.CalledProcessError as e:
        print(
            f"release: no MODULE.bazel at {args.ref!r}: {e.stderr.decode().strip()}",
            file=sys.stderr,
        )
        return 1
    version = args.version or at_ref
    if version != at_ref:
        print(
            f"release: --version {version} but MODULE.bazel at {args.ref} says {at_ref}: "
            "bump module(version = ...) first",
            file=sys.stderr,
        )
        return 1
    dirty = _git("status", "--porcelain", "--untracked-files=no", repo=args.repo).strip()
    if dirty and args.ref == "HEAD" and not args.allow_dirty:
        print(
            "release: the working tree has uncommitted changes, which the archive (of the "
            "commit) would not hold; commit them, or pass --allow-dirty",
            file=sys.stderr,
        )
        return 1
    data = archive(args.repo, args.ref, version)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{NAME}-{version}.tar.gz"
    path.write_bytes(data)
    print(f"archive: {path}")
    print(f"integrity: {integrity(data)}")
    print(f"strip_prefix: {NAME}-{version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

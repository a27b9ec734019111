"""The Bazel Central Registry's files (.bcr/) have the shape its documentation gives, the
release archive is reproducible, and MODULE.bazel's dependencies are those
docs/releasing.md says were checked on the BCR.

The shapes: metadata.json's schema (bazelbuild/bazel-central-registry,
metadata.schema.json: `homepage`, `maintainers` and `versions` required, nothing else but
`repository` and `yanked_versions`), source.json's fields as publish-to-bcr's templates
document them (`integrity` left empty, `strip_prefix`, `url` with `{OWNER}`, `{REPO}`,
`{VERSION}`, `{TAG}` substituted), and presubmit.yml's tasks as the BCR's docs/README.md
gives them (a `bazel` and `platform` for every task, `bcr_test_module.module_path` a
directory with a MODULE.bazel).
"""

from __future__ import annotations

import io
import json
import pathlib
import re
import subprocess
import sys
import tarfile

import pytest
import release

from support.starlark_util import REPO, run_starlark

BCR = REPO / ".bcr"
BAZELS = ["7.x", "8.x", "9.x"]
# Linux platforms of Bazel CI (the BCR's presubmit machines).
LINUX = re.compile(r"^(debian\d+|ubuntu\d{4}|rockylinux\d+|centos\d+|fedora\d+)(_arm64)?$")


def _scalar(text: str) -> object:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(t) for t in text[1:-1].split(",") if t.strip()]
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def load_yaml(text: str) -> dict:
    """The subset of YAML presubmit.yml is written in: nested mappings, `- item` lists,
    flow lists of scalars, quoted and plain scalars, comments."""
    lines = []
    for raw in text.splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.strip():
            lines.append((len(line) - len(line.lstrip()), line.strip()))

    def block(i: int, indent: int) -> tuple[object, int]:
        if lines[i][1].startswith("- "):
            items = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                items.append(_scalar(lines[i][1][2:]))
                i += 1
            return items, i
        mapping: dict[str, object] = {}
        while i < len(lines) and lines[i][0] == indent:
            key, _, value = lines[i][1].partition(":")
            i += 1
            if value.strip():
                mapping[key] = _scalar(value)
            else:
                mapping[key], i = block(i, lines[i][0])
        return mapping, i

    result, end = block(0, 0)
    assert end == len(lines), f"presubmit.yml: unparsed from line {lines[end]}"
    assert isinstance(result, dict)
    return result


def test_metadata_template_follows_the_bcr_schema() -> None:
    meta = json.loads((BCR / "metadata.template.json").read_text())
    assert set(meta) <= {
        "$schema",
        "homepage",
        "maintainers",
        "repository",
        "versions",
        "yanked_versions",
        "deprecated",
    }
    assert {"homepage", "maintainers", "versions"} <= set(meta)
    assert meta["homepage"].startswith("https://")
    assert len(meta["maintainers"]) >= 1
    for m in meta["maintainers"]:
        assert set(m) <= {"github", "github_user_id", "name", "email", "do_not_notify"}, m
        assert re.fullmatch(r"[-a-zA-Z0-9]*", m["github"]), m
        assert isinstance(m.get("github_user_id", 0), int)
    assert all(re.fullmatch(r"github:[\w.-]+/[\w.-]+", r) for r in meta["repository"])
    # publish-to-bcr fills these in: the template leaves them empty.
    assert (meta["versions"], meta["yanked_versions"]) == ([], {})


def test_source_template_names_the_release_archive() -> None:
    source = json.loads((BCR / "source.template.json").read_text())
    assert set(source) == {"integrity", "strip_prefix", "url"}
    assert source["integrity"] == ""  # publish-to-bcr computes it
    assert source["url"].startswith("https://github.com/{OWNER}/{REPO}/releases/download/{TAG}/")
    # The name and prefix of the archive scripts/release.py makes.
    assert source["url"].endswith(f"/{release.NAME}-{{VERSION}}.tar.gz")
    assert source["strip_prefix"] == f"{release.NAME}-{{VERSION}}"
    meta = json.loads((BCR / "metadata.template.json").read_text())
    assert [r.split("/")[1] for r in meta["repository"]] == [release.NAME]


def test_presubmit_builds_the_test_module_on_bazel_7_8_and_9_on_linux() -> None:
    pre = load_yaml((BCR / "presubmit.yml").read_text())
    assert set(pre) <= {"matrix", "tasks", "bcr_test_module"}
    test_module = pre["bcr_test_module"]
    for section in (pre, test_module):
        assert section["matrix"]["bazel"] == BAZELS
        assert all(LINUX.match(p) for p in section["matrix"]["platform"]), section["matrix"]
        for name, task in section["tasks"].items():
            assert task["bazel"] == "${{ bazel }}" and task["platform"] == "${{ platform }}"
            assert task.get("build_targets") or task.get("test_targets"), name
            assert "test_targets" not in task, "no GPU on the BCR's machines: build only"
    module = REPO / test_module["module_path"]
    assert (module / "MODULE.bazel").is_file()
    assert test_module["tasks"]["run_test_module"]["build_targets"] == ["//..."]


def _calls(path: pathlib.Path, tmp_path: pathlib.Path) -> list[dict]:
    out = tmp_path / f"{path.parent.name}-{path.name}.json"
    proc = run_starlark(path, "-calls", str(out))
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_the_test_module_uses_this_checkout_and_the_wheel_sdk(tmp_path: pathlib.Path) -> None:
    smoke = REPO / "e2e" / "smoke"
    calls = _calls(smoke / "MODULE.bazel", tmp_path)
    (override,) = [c for c in calls if c["fn"] == "local_path_override"]
    assert override["kwargs"]["module_name"] == "rules_cuda_split"
    assert (smoke / override["kwargs"]["path"]).resolve() == REPO
    assert [c["fn"] for c in calls if c["fn"].startswith("cuda.")] == ["cuda.wheel_sdk"]
    # This repository's own builds leave the test module alone.
    assert "e2e" in (REPO / ".bazelignore").read_text().split()


def checked_on_bcr() -> dict[str, str]:
    """docs/releasing.md's table of the bazel_dep versions checked on the BCR."""
    text = (REPO / "docs" / "releasing.md").read_text()
    return dict(re.findall(r"^\| `(\w+)` \| `([\w.-]+)` \|", text, re.M))


@pytest.mark.parametrize("module", ["MODULE.bazel", "e2e/smoke/MODULE.bazel"])
def test_every_bazel_dep_is_a_version_checked_on_the_bcr(
    module: str, tmp_path: pathlib.Path
) -> None:
    checked = checked_on_bcr()
    assert checked, "docs/releasing.md has no table of checked versions"
    for dep in [c for c in _calls(REPO / module, tmp_path) if c["fn"] == "bazel_dep"]:
        name, version = dep["kwargs"]["name"], dep["kwargs"].get("version", "")
        if name == "rules_cuda_split":
            continue  # the test module's local_path_override
        assert checked.get(name) == version, (
            f"{module}: bazel_dep {name} {version}: check it on the BCR and update "
            "docs/releasing.md's table"
        )


def test_release_archive_is_reproducible_and_holds_the_module() -> None:
    version = release.module_version((REPO / "MODULE.bazel").read_text())
    first = release.archive(REPO, "HEAD", version)
    assert release.archive(REPO, "HEAD", version) == first
    assert first[:9] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02"  # no name, mtime 0
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        names = set(tar.getnames())
    prefix = f"rules_cuda_split-{version}/"
    for path in ("MODULE.bazel", "LICENSE", ".bcr/presubmit.yml", "e2e/smoke/MODULE.bazel"):
        assert prefix + path in names, path
    assert all(n.startswith(prefix) or n == prefix.rstrip("/") for n in names)
    assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", release.integrity(first))


def test_release_refuses_a_version_module_bazel_does_not_name(tmp_path: pathlib.Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "release.py"),
            "--version",
            "9.9.9",
            "--allow-dirty",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "--version 9.9.9 but MODULE.bazel at HEAD says" in proc.stderr
    assert list(tmp_path.iterdir()) == []

"""Where a CUDA SDK on this machine is: the places looked at, in order, and the messages.

`cuda_sdk_repository` (and a wheel SDK's `local_fallback`) looks at the `path` attribute,
`$CUDA_PATH`, `$CUDA_HOME`, the `nvcc` on `$PATH`, then the default paths; a set one that
names no SDK is an error, the others are passed over.

The functions not taking `rctx` are pure, so tests run them without Bazel.
"""

# Where an SDK is looked for after the attribute, CUDA_PATH, CUDA_HOME and PATH.
DEFAULT_SDK_PATHS = ["/usr/local/cuda"]

def sdk_candidates(path_attr, environ, nvcc_on_path, default_paths):
    """The places to look for an SDK, in order.

    Args:
      path_attr: string, the `path` attribute ("" when not set).
      environ: dict of environment variables.
      nvcc_on_path: string, the real path of `nvcc` found on PATH, "" when none.
      default_paths: list of strings, the last places to look.

    Returns:
      list of structs (source: string; path: string, "" when not set; unset: string, why
      there is no path; explicit: bool, True when the user named this path (the attribute,
      `$CUDA_PATH`, `$CUDA_HOME`), so that a bad one is an error rather than skipped).
    """
    candidates = [
        struct(source = "attribute path", path = path_attr, unset = "not set", explicit = True),
        struct(
            source = "$CUDA_PATH",
            path = environ.get("CUDA_PATH", ""),
            unset = "not set",
            explicit = True,
        ),
        struct(
            source = "$CUDA_HOME",
            path = environ.get("CUDA_HOME", ""),
            unset = "not set",
            explicit = True,
        ),
    ]
    nvcc_root = ""
    if nvcc_on_path:
        # <root>/bin/nvcc -> <root>
        nvcc_root = nvcc_on_path.rpartition("/")[0].rpartition("/")[0] or "/"
    candidates.append(struct(
        source = "nvcc on $PATH" + (" (%s)" % nvcc_on_path if nvcc_on_path else ""),
        path = nvcc_root,
        unset = "no nvcc on PATH",
        explicit = False,
    ))
    if not default_paths:
        candidates.append(struct(
            source = "default paths",
            path = "",
            unset = "none (default_paths = [])",
            explicit = False,
        ))
    for default in default_paths:
        candidates.append(struct(
            source = "default path",
            path = default,
            unset = "",
            explicit = False,
        ))
    return candidates

_PROBE_REASONS = {
    "missing": "\"%s\" does not exist",
    "no_nvcc": "\"%s\" has no bin/nvcc",
    "no_profile": "\"%s\" has bin/nvcc but no bin/nvcc.profile (a wrapper, not an SDK)",
}

def search_sdk(candidates, probes):
    """Walks the candidates in order to the first SDK.

    Args:
      candidates: list of structs from `sdk_candidates`.
      probes: dict, path -> what it holds: "sdk" (bin/nvcc and bin/nvcc.profile),
        "no_profile" (bin/nvcc only), "no_nvcc" or "missing".

    Returns:
      struct(path: string, the SDK, "" when none; source: string, which candidate;
      looked: list of structs (source, path, reason), the candidates passed over; bad:
      the struct (source, path, reason) of a set explicit candidate that is no SDK, which
      ends the search, or None).
    """
    looked = []
    for candidate in candidates:
        if not candidate.path:
            looked.append(struct(source = candidate.source, path = "", reason = candidate.unset))
            continue
        kind = probes[candidate.path]
        if kind == "sdk":
            return struct(
                path = candidate.path,
                source = candidate.source,
                looked = looked,
                bad = None,
            )
        place = struct(
            source = candidate.source,
            path = candidate.path,
            reason = _PROBE_REASONS[kind] % candidate.path,
        )
        looked.append(place)
        if candidate.explicit:
            return struct(path = "", source = "", looked = looked, bad = place)
    return struct(path = "", source = "", looked = looked, bad = None)

def bad_sdk_message(name, bad):
    """The error message when the `path` attribute, `$CUDA_PATH` or `$CUDA_HOME` names no SDK.

    Nothing else is tried then, so a typo cannot pick another SDK silently.

    Args:
      name: string, the repository's name.
      bad: struct (source, path, reason) from `search_sdk`.

    Returns:
      string.
    """
    if bad.source == "attribute path":
        what = "the attribute path = \"%s\"" % bad.path
        fix = [
            "Fix the attribute: cuda_sdk_repository(name = \"%s\", path = ...)," % name +
            " or with bzlmod" +
            " cuda.sdk(name = \"%s\", path = ...) in MODULE.bazel, must name the directory" % name +
            " holding bin/nvcc.",
        ]
    else:
        var = bad.source[1:]
        what = "%s is set to \"%s\"" % (var, bad.path)
        fix = [
            "Point %s at an SDK (the directory holding bin/nvcc and bin/nvcc.profile)" % var +
            " or unset it:",
            "  - set by Bazel's --repo_env=%s=... (command line, .bazelrc or" % var +
            " .bazelrc.user): change or remove that flag;",
            "  - else exported in the shell that started Bazel: `unset %s`, then" % var +
            " `bazel shutdown` (the server keeps the environment it started with).",
        ]
    return "\n".join([
        "cuda_sdk_repository(name = \"%s\"): %s, which is not a CUDA SDK: %s." % (
            name,
            what,
            bad.reason,
        ),
        "When it is set, nothing else is tried (no other SDK is picked in its place).",
    ] + fix)

def not_found_message(name, looked, path_env):
    """The error message when no SDK was found.

    Args:
      name: string, the repository's name.
      looked: list of structs (source, path, reason) in the order looked at.
      path_env: string, the value of PATH that was searched for nvcc.

    Returns:
      string.
    """
    lines = [
        "cuda_sdk_repository(name = \"%s\"): found no CUDA SDK " % name +
        "(a directory with bin/nvcc and bin/nvcc.profile).",
        "Looked at, in order:",
    ]
    for i, place in enumerate(looked):
        lines.append("  %d. %s: %s" % (i + 1, place.source, place.reason))
    lines.append("  (PATH searched for nvcc: \"%s\")" % path_env)
    lines.extend([
        "Point it at an SDK (the directory holding bin/nvcc) with one of:",
        "  - the attribute: cuda_sdk_repository(name = \"%s\", path = \"/opt/cuda\")," % name +
        " or with bzlmod cuda.sdk(name = \"%s\", path = \"/opt/cuda\") in MODULE.bazel;" % name,
        "  - CUDA_PATH (or CUDA_HOME) for Bazel: --repo_env=CUDA_PATH=/opt/cuda on the command" +
        " line or in .bazelrc, or exported in the shell that starts Bazel;",
        "  - in a checkout of rules_cuda_split: `bash scripts/setup.sh` installs the pinned" +
        " CUDA wheels into .sdk/; --repo_env=CUDA_PATH=$PWD/.sdk/<SDK root> names them" +
        " (`python3 scripts/cuda_version_table.py --sdk-root` prints the SDK root).",
    ])
    return "\n".join(lines)

def _probe(rctx, path):
    # nvcc.profile sits beside the real nvcc; a directory with only bin/nvcc (a wrapper
    # script such as /usr/local/bin/nvcc) is not an SDK.
    if rctx.path(path + "/bin/nvcc").exists:
        return "sdk" if rctx.path(path + "/bin/nvcc.profile").exists else "no_profile"
    return "no_nvcc" if rctx.path(path).exists else "missing"

def find_local_sdk(rctx, path_attr, default_paths):
    """Returns (path, source) of the first SDK found; fails listing every place looked.

    Args:
      rctx: the repository context.
      path_attr: string, an explicit SDK directory ("" for none).
      default_paths: list of strings, the places looked at last.

    Returns:
      (string, string): the SDK's directory and which candidate it was.
    """
    nvcc_on_path = rctx.which("nvcc")
    candidates = sdk_candidates(
        path_attr = path_attr,
        environ = rctx.os.environ,
        nvcc_on_path = str(nvcc_on_path.realpath) if nvcc_on_path else "",
        default_paths = default_paths,
    )
    probes = {c.path: _probe(rctx, c.path) for c in candidates if c.path}
    found = search_sdk(candidates, probes)
    if found.bad:
        fail(bad_sdk_message(rctx.name, found.bad))
    if not found.path:
        fail(not_found_message(rctx.name, found.looked, rctx.os.environ.get("PATH", "")))

    # Candidates passed over (a wrapper nvcc on PATH, an absent /usr/local/cuda) are
    # normal, not printed: they appear only in the not-found error.
    return found.path, found.source

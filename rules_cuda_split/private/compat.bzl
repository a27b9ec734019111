"""What differs between the Bazel versions the rules support (7.7.1, the baseline; 8; 9).

Every such difference the rules' Starlark meets is here, each with the versions it is for;
docs/compatibility.md lists them. Pure Starlark but for the `repository_ctx` handed in.
"""

# Bazel 8 and 9 fail on a glob that matches nothing (`--incompatible_disallow_empty_glob`,
# on by default from 8): the SDK repository's BUILD file (sdk.BUILD.tpl, sdk_build.bzl)
# gives `allow_empty = True` to each glob of files only some SDKs have (tileiras) and
# lists libnvvm by name rather than globbing for it.

# A canonical repository name's separator: `_main~cuda~cuda` (Bazel 7),
# `rules_cuda_split+cuda+cuda` (Bazel 8 and 9).
_CANONICAL_SEPARATORS = ["~", "+"]

def apparent_repo_name(canonical):
    """The name a user gave a repository, from its canonical name (Bazel 7, 8 and 9).

    `_main~cuda~cuda`, `rules_cuda_split+cuda+cuda` -> `cuda`; a WORKSPACE repository's
    name is its own.

    Args:
      canonical: string, e.g. `repository_ctx.name`.

    Returns:
      string.
    """
    name = canonical
    for separator in _CANONICAL_SEPARATORS:
        name = name.split(separator)[-1]
    return name

def module_repo_name(workspace_name):
    """A module's own repository by its module's name.

    `rules_cuda_split~` (Bazel 7), `rules_cuda_split+` (Bazel 8 and 9) ->
    `rules_cuda_split`; any other name unchanged.

    Args:
      workspace_name: string, a Label's `workspace_name`.

    Returns:
      string.
    """
    for separator in _CANONICAL_SEPARATORS:
        if workspace_name.endswith(separator):
            return workspace_name[:-len(separator)]
    return workspace_name

def download_and_extract(rctx, urls, output, sha256, type, strip_prefix):
    """`repository_ctx.download_and_extract` that does not fail when the download does.

    The archive's parameters are passed by position: Bazel 7 names the fifth `stripPrefix`,
    Bazel 8 and 9 `strip_prefix`.

    Args:
      rctx: the repository context.
      urls: list of strings.
      output: string, the directory to extract into, relative to the repository.
      sha256: string.
      type: string, the archive's type (`zip`, `tar.xz`, ...).
      strip_prefix: string, the directory prefix to strip.

    Returns:
      The download's result: `.success` is False when it failed.
    """
    return rctx.download_and_extract(urls, output, sha256, type, strip_prefix, allow_fail = True)

"""The unpacked-SDK cache (`$CUDA_SPLIT_SDK_CACHE`): each wheel SDK's tree unpacked once,
hard-linked into every repository of the same archives, in any output base (docs/sdk.md).
"""

load(
    "//rules_cuda_split/private/repositories:wheel_fetch.bzl",
    "SDK_DIR",
    "SDK_MTIME",
    "wheel_sdk_fail",
)

# An absolute directory of unpacked SDKs shared by every output base (`--repo_env`):
# each version's tree is unpacked once and hard-linked into each repository (docs/sdk.md).
SDK_CACHE_ENV = "CUDA_SPLIT_SDK_CACHE"

def unpacked_cache(rctx):
    """$CUDA_SPLIT_SDK_CACHE: where unpacked SDKs are kept for every output base.

    Args:
      rctx: the repository context.

    Returns:
      string, the absolute directory, "" when not set.
    """
    cache = rctx.os.environ.get(SDK_CACHE_ENV, "")
    if cache.startswith("~/"):
        cache = rctx.os.environ.get("HOME", "~") + cache[1:]
    if cache and not cache.startswith("/"):
        wheel_sdk_fail(rctx, "%s=%s: not an absolute path (it is shared by every workspace)" % (
            SDK_CACHE_ENV,
            cache,
        ))
    if cache.rstrip("/") == "/tmp" or cache.startswith("/tmp/"):
        # The SDK repository's files are links into the cache: a sandboxed action whose
        # /tmp is its own (Bazel 7's default) finds none of them.
        # buildifier: disable=print
        print(("warning: %s=%s is under /tmp, which Bazel 7's sandbox gives each action " +
               "as its own empty directory (--incompatible_sandbox_hermetic_tmp, the " +
               "default): no sandboxed action would see the SDK. Choose a directory " +
               "outside /tmp (e.g. ~/.cache/cuda-split-sdk), or build with " +
               "--noincompatible_sandbox_hermetic_tmp.") % (SDK_CACHE_ENV, cache))
    return cache.rstrip("/")

def _run(rctx, args):
    return rctx.execute(args).return_code == 0

def cache_key(rctx, plan):
    """A SHA-256 of what the unpacked tree is made of: the archives, how they unpack.

    Args:
      rctx: the repository context.
      plan: list of structs from `download_plan`.

    Returns:
      string, the cache entry's name.
    """
    lines = ["layout 1", "mtime %d" % SDK_MTIME] + [
        "%s %s %s" % (i.sha256, i.type, i.strip_prefix)
        for i in plan
    ]
    rctx.file("sdk_cache_key.txt", "\n".join(lines) + "\n", executable = False)
    result = rctx.execute(["sha256sum", "sdk_cache_key.txt"])
    rctx.delete("sdk_cache_key.txt")
    if result.return_code != 0:
        wheel_sdk_fail(rctx, "sha256sum failed: %s" % result.stderr)
    return result.stdout.split(" ")[0]

def link_from_cache(rctx, cache, key):
    """Makes SDK_DIR hard links to the cache's entry `key`; False if there is none.

    Across file systems it copies instead.

    Args:
      rctx: the repository context.
      cache: string, the cache's directory.
      key: string, the entry's name (`cache_key`).

    Returns:
      bool.
    """
    entry = "%s/%s/%s" % (cache, key, SDK_DIR)
    if not rctx.path(entry).exists:
        return False
    rctx.report_progress("Linking CUDA %s from %s" % (rctx.attr.version, entry))
    for copy in (["cp", "-al"], ["cp", "-a"]):
        if _run(rctx, copy + [entry, SDK_DIR]):
            return True
        rctx.delete(SDK_DIR)
    return False

def add_to_cache(rctx, cache, key):
    """Puts SDK_DIR into the cache as entry `key`, as hard links.

    The entry is renamed into place, so it is whole or absent; a cache that cannot take
    it is left alone.

    Args:
      rctx: the repository context.
      cache: string, the cache's directory.
      key: string, the entry's name (`cache_key`).
    """
    made = rctx.execute(["mktemp", "-d", "%s/.%s.XXXXXX" % (cache, key)])
    if made.return_code != 0 and _run(rctx, ["mkdir", "-p", cache]):
        made = rctx.execute(["mktemp", "-d", "%s/.%s.XXXXXX" % (cache, key)])
    if made.return_code != 0:
        return
    tmp = made.stdout.strip()
    copied = False
    for copy in (["cp", "-al"], ["cp", "-a"]):
        if _run(rctx, copy + [SDK_DIR, tmp + "/" + SDK_DIR]):
            copied = True
            break
        _run(rctx, ["rm", "-rf", tmp + "/" + SDK_DIR])

    # Another fetch may have put the entry there first: keep its, drop ours.
    if not (copied and _run(rctx, ["mv", "-T", tmp, "%s/%s" % (cache, key)])):
        _run(rctx, ["rm", "-rf", tmp])

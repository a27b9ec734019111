"""The wheel SDK's fetch: download and unpack the plan's archives, or use an SDK on the
machine in their place (`$CUDA_SPLIT_LOCAL_SDK`, `local_fallback`).
"""

load("//rules_cuda_split/private:compat.bzl", "download_and_extract")
load(
    "//rules_cuda_split/private/repositories:sdk_lookup.bzl",
    "DEFAULT_SDK_PATHS",
    "find_local_sdk",
)
load(
    "//rules_cuda_split/private/repositories:sdk_repository.bzl",
    "configure_sdk_repository",
    "parse_nvcc_version",
)

# Where the downloaded SDK lies inside the repository; the repository root gets symlinks
# to its top-level entries, as for an SDK on the machine.
SDK_DIR = "sdk"

# An absolute SDK directory on this machine used in place of the wheels (`--repo_env`), for
# a machine that reaches no registry but has the same CUDA version installed, e.g. a GPU
# machine whose /usr/local/cuda holds cuBLAS, too large to carry there as wheels.
LOCAL_SDK_ENV = "CUDA_SPLIT_LOCAL_SDK"

# gcc's `#pragma once` takes two equal headers for one file only when their mtimes are
# equal too, and CCCL ships equal headers: one mtime for the whole SDK (as
# scripts/setup.sh gives .sdk/), so preprocessed sources do not depend on when Bazel
# unpacked the wheels.
SDK_MTIME = 315532800  # 1980-01-01 00:00 UTC, the zip epoch

def wheel_sdk_fail(rctx, msg):
    """Fails naming the `cuda_wheel_sdk_repository`."""
    fail("cuda_wheel_sdk_repository(name = \"%s\"): %s" % (rctx.name, msg))

def local_fallback(rctx, why):
    """Configures the repository as the machine's SDK where `local_fallback` allows it.

    Args:
      rctx: the repository context.
      why: string, why the wheels cannot be used; the error when it does not fall back.
    """
    if not rctx.attr.local_fallback:
        wheel_sdk_fail(rctx, why + "\nIt does not fall back to an SDK on this machine " +
                             "($CUDA_PATH, nvcc on $PATH, /usr/local/cuda): set " +
                             "local_fallback = True for that.")

    # buildifier: disable=print
    print("cuda_wheel_sdk_repository(name = \"%s\"): %s; falling back to a local SDK" % (
        rctx.name,
        why,
    ))
    sdk_path, source = find_local_sdk(rctx, "", DEFAULT_SDK_PATHS)
    configure_sdk_repository(rctx, sdk_path, source)

def use_local_sdk(rctx, sdk_path):
    """Configures the repository as the SDK at `sdk_path` ($CUDA_SPLIT_LOCAL_SDK).

    Args:
      rctx: the repository context.
      sdk_path: string, the variable's value.
    """
    setting = "%s=%s" % (LOCAL_SDK_ENV, sdk_path)
    if not sdk_path.startswith("/"):
        wheel_sdk_fail(rctx, setting + ": not an absolute path; name the SDK's directory " +
                             "(the one holding bin/nvcc), e.g. /usr/local/cuda")
    nvcc = rctx.path(sdk_path + "/bin/nvcc")
    if not nvcc.exists:
        wheel_sdk_fail(rctx, setting + ": no bin/nvcc there; name the SDK's directory (the one " +
                             "holding bin/nvcc), e.g. /usr/local/cuda")
    result = rctx.execute([str(nvcc), "--version"])
    found = parse_nvcc_version(result.stdout)
    if found.split(".")[:2] != rctx.attr.version.split(".")[:2]:
        wheel_sdk_fail(rctx, ("%s: its nvcc is CUDA %s, this repository is CUDA %s; " +
                              "name an SDK of %s ") % (
            setting,
            found or "of unknown version (exit %d)" % result.return_code,
            rctx.attr.version,
            rctx.attr.version,
        ) + "or unset the variable to use the wheels")
    configure_sdk_repository(rctx, sdk_path, "$" + LOCAL_SDK_ENV)

def download_and_unpack(rctx, plan):
    """Downloads and unpacks `plan`'s wheels into SDK_DIR.

    Args:
      rctx: the repository context.
      plan: list of structs from `download_plan`.

    Returns:
      bool, False when a download failed and the repository fell back to a local SDK.
    """
    for item in plan:
        rctx.report_progress("Fetching CUDA %s %s (%s %s)" % (
            rctx.attr.version,
            item.component,
            item.package,
            item.version,
        ))

        # Every wheel of a version unpacks into the one SDK tree, as pip install does. A
        # failed download falls back, or fails with our message.
        result = download_and_extract(
            rctx,
            item.urls,
            SDK_DIR,
            item.sha256,
            item.type,
            item.strip_prefix,
        )
        if not result.success:
            local_fallback(rctx, "could not download %s (%s)" % (item.urls[0], item.package))
            return False
    rctx.execute(["find", SDK_DIR, "-exec", "touch", "-h", "-d", "@%d" % SDK_MTIME, "{}", "+"])
    return True

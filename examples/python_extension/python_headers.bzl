"""`python_headers`: the C headers of the `python3` on PATH, as `@<name>//:python_headers`.

For the Python extension example. The headers come from the machine (not hermetic: the
repository is refetched when PATH changes); a project that ships extensions would take
them from a pinned interpreter instead (e.g. rules_python's toolchain).
"""

_BUILD = """\
load("@rules_cc//cc:defs.bzl", "cc_library")

cc_library(
    name = "python_headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    visibility = ["//visibility:public"],
)
"""

_INCLUDE = "import sysconfig; print(sysconfig.get_paths()['include'])"

def _python_headers_impl(rctx):
    python = rctx.which("python3")
    if python == None:
        fail("python_headers: no python3 on PATH")
    result = rctx.execute([python, "-c", _INCLUDE])
    include = rctx.path(result.stdout.strip())
    if result.return_code != 0 or not include.get_child("Python.h").exists:
        fail("python_headers: %s has no Python.h in '%s' (install its headers, e.g. " %
             (python, include) + "Debian's python3-dev)\n" + result.stderr)
    rctx.symlink(include, "include")
    rctx.file("BUILD.bazel", _BUILD)

python_headers = repository_rule(
    implementation = _python_headers_impl,
    doc = "The C headers of the `python3` on PATH, as `@<name>//:python_headers`.",
    environ = ["PATH"],
    local = True,
)

"""`bzl_libraries`: the bzl_library of each .bzl file of a package (for stardoc and other
tools), declared from one table of what each file loads."""

load("@bazel_skylib//:bzl_library.bzl", "bzl_library")

def bzl_libraries(loads):
    """A public bzl_library `<stem>_bzl` of `<stem>.bzl` for each entry of `loads`.

    Args:
      loads: `<stem>` -> the bzl_library targets of the files `<stem>.bzl` loads.
    """
    for stem, deps in loads.items():
        bzl_library(
            name = stem + "_bzl",
            srcs = [stem + ".bzl"],
            visibility = ["//visibility:public"],
            deps = deps,
        )

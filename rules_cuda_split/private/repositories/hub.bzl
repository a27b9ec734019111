"""The hub over several CUDA SDK repositories, one per version: `cuda_sdk_versions`.

Toolchains chosen by the build setting `--@rules_cuda_split//cuda:version` (`""`, the
default, is the hub's default version) and aliases of the SDK targets (`@<hub>//:cublas`,
...: HUB_TARGETS of sdk_targets.bzl) that follow it. Its BUILD file is hub.BUILD.tpl,
filled by `hub_substitutions`.

The functions not taking `rctx` are pure, so tests run them without Bazel.
"""

load("//rules_cuda_split/private:compat.bzl", "apparent_repo_name")
load("//rules_cuda_split/private/repositories:host.bzl", "repository_host")
load("//rules_cuda_split/private/repositories:sdk_targets.bzl", "HUB_TARGETS")

# The hub's BUILD file, with `%{name}` placeholders (hub_substitutions).
HUB_BUILD_TEMPLATE = Label("//rules_cuda_split/private/repositories:hub.BUILD.tpl")

def hub_substitutions(hub, versions, default_version, flag, exec_constraints):
    """What `repository_ctx.template` replaces in hub.BUILD.tpl.

    Args:
      hub: string, the hub's name as the user gave it, for messages.
      versions: dict, CUDA version -> the name of its SDK repository.
      default_version: string, the version built with the flag unset.
      flag: string, the version build setting's label.
      exec_constraints: list of label strings for the toolchains.

    Returns:
      dict, `%{key}` -> string.
    """
    ordered = sorted(versions.keys())
    settings = "".join(["""
config_setting(
    name = "version_{v}",
    flag_values = {{"{flag}": "{v}"}},
)
""".format(v = version, flag = flag) for version in ordered])

    # The default version answers both to "" and to its own number: two toolchains, one
    # repository, so both builds share every action.
    choices = [("default", default_version)] + [(v, v) for v in ordered]
    toolchains = "".join(["""
toolchain(
    name = "toolchain_{s}",
    exec_compatible_with = {exec_constraints},
    target_settings = [":version_{s}"],
    toolchain = "@{repo}//:toolchain_impl",
    toolchain_type = "@rules_cuda_split//cuda:toolchain_type",
)
""".format(
        s = setting,
        repo = versions[version],
        exec_constraints = json.encode(exec_constraints),
    ) for setting, version in choices])
    aliases = "\n".join(["""alias(
    name = "{t}",
    actual = select({{
{arms},
        "//conditions:default": ":version_missing",
    }}),
)
""".format(t = target, arms = ",\n".join([
        '        ":version_%s": "@%s//:%s"' % (s, versions[v], target)
        for s, v in choices
    ])) for target in HUB_TARGETS]).rstrip("\n")
    values = {
        "hub": hub,
        "versions": ", ".join(ordered),
        "version_list": json.encode(ordered),
        "default": default_version,
        "flag": flag,
        "exec_constraints": json.encode(exec_constraints),
        "version_settings": settings,
        "toolchains": toolchains,
        "aliases": aliases,
    }
    return {"%{" + key + "}": value for key, value in values.items()}

def _label_string(label):
    # A main-repository label written as `//pkg:name` would, in the hub's BUILD file,
    # name the hub itself; `@//pkg:name` is the main repository everywhere.
    s = str(label)
    return "@" + s if s.startswith("//") else s

def _cuda_sdk_versions_impl(rctx):
    versions = rctx.attr.versions
    if rctx.attr.default_version not in versions:
        fail("cuda_sdk_versions(name = \"%s\"): default_version %s is not among %s" % (
            rctx.name,
            rctx.attr.default_version,
            ", ".join(sorted(versions.keys())),
        ))
    host = repository_host(rctx, "cuda_sdk_versions")
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.template("BUILD.bazel", HUB_BUILD_TEMPLATE, hub_substitutions(
        apparent_repo_name(rctx.name),
        versions,
        rctx.attr.default_version,
        _label_string(rctx.attr.version_flag),
        ["@platforms//os:linux", "@platforms//cpu:" + host.cpu],
    ), executable = False)

cuda_sdk_versions = repository_rule(
    implementation = _cuda_sdk_versions_impl,
    doc = """The hub over several CUDA SDK repositories, one per version.

`:toolchain_<version>` and `:toolchain_default` (register `@<hub>//:all`), each with
`target_settings` on `--@rules_cuda_split//cuda:version`; aliases of the SDK targets
(`:cublas`, `:cuda_headers`, ...) that follow the flag.""",
    attrs = {
        "versions": attr.string_dict(
            doc = "CUDA version -> the name of its SDK repository.",
            mandatory = True,
        ),
        "default_version": attr.string(
            doc = "The version built when the flag is unset.",
            mandatory = True,
        ),
        "version_flag": attr.label(
            doc = "The build setting that chooses the version.",
            default = Label("//cuda:version"),
        ),
    },
)

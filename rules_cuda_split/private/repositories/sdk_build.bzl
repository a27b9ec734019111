"""The SDK repository's BUILD file: what `repository_ctx.template` fills sdk.BUILD.tpl with.

The template holds the targets written once for every SDK; the substitutions are the
SDK's paths and archs and the targets made from tables: each tool's file group (the tools
table, model/tools.bzl) and each library (SDK_LIBRARIES, sdk_targets.bzl), a
`cuda_component_missing` where the SDK lacks it.

Pure Starlark, so tests render the file without Bazel (`fill_template`).
"""

load("//rules_cuda_split/private/model:tools.bzl", "sdk_tool_globs")
load("//rules_cuda_split/private/repositories:sdk_targets.bzl", "SDK_LIBRARIES")

# The SDK repository's BUILD file, with `%{name}` placeholders (sdk_build_substitutions).
SDK_BUILD_TEMPLATE = Label("//rules_cuda_split/private/repositories:sdk.BUILD.tpl")

def quote_list(items, indent):
    """`items` as a BUILD file's list of strings, one a line, closed at `indent` spaces.

    Args:
      items: list of strings.
      indent: int.

    Returns:
      string.
    """
    if not items:
        return "[]"
    pad = " " * indent
    return "[\n" + "".join(["%s    \"%s\",\n" % (pad, item) for item in items]) + pad + "]"

def _libraries(sdk):
    lib_deps = getattr(sdk, "lib_deps", {})
    out = "".join([
        """
cc_library(
    name = "%s",
    srcs = %s,
    deps = %s,
)
""" % (
            name,
            quote_list(sdk.shared_libs[name], 4),
            quote_list([":cuda_headers"] + [
                ":" + dep
                for dep in lib_deps.get(name, [])
                if dep in sdk.shared_libs
            ], 4),
        )
        for name in sorted(sdk.shared_libs.keys())
    ])

    # A library target this SDK lacks fails at analysis naming the component to add
    # (Bazel alone says only "no such target").
    return out + "".join([
        """
cuda_component_missing(
    name = "%s",
    sdk = "CUDA %s (found by: %s)",
)
""" % (name, sdk.version, sdk.source.replace("\"", "'"))
        for name in SDK_LIBRARIES
        if name not in sdk.shared_libs
    ])

def _tools(sdk):
    # Each tool's file group, from the tools table; the libnvvm files found, by name,
    # where a tool loads libnvvm. allow_empty: tileiras is only in newer SDKs (see
    # private/compat.bzl on empty globs).
    libnvvm = sdk.libnvvm + getattr(sdk, "layout_links", [])
    tool_files = ""
    toolkit_tools = ""
    globs = sdk_tool_globs(inc = sdk.include_dir, lib = sdk.lib_dir, libnvvm = [])
    for name, tool in globs.items():
        exclude = ""
        if tool.exclude:
            exclude = "        exclude = %s,\n" % quote_list(tool.exclude, 8)
        extra = ""
        if tool.with_libnvvm and libnvvm:
            extra = " + " + quote_list(libnvvm, 4)
        tool_files += "\nfilegroup(\n    name = \"%s_files\",\n    srcs = glob(\n" % name
        tool_files += "        %s,\n%s        allow_empty = True,\n    )%s,\n)\n" % (
            quote_list(tool.include, 8),
            exclude,
            extra,
        )
        toolkit_tools += "    %s = [\":%s_files\"],\n" % (name, name)
    return tool_files, toolkit_tools

def sdk_build_substitutions(sdk):
    """What `repository_ctx.template` replaces in sdk.BUILD.tpl for one SDK.

    Args:
      sdk: struct with
        path: string, where the SDK is;
        source: string, how it was found;
        version: string, e.g. "13.0.88";
        include_dir: string, the include directory relative to the repository root;
        lib_dir: string, the library directory relative to the repository root;
        libnvvm: list of strings, the libnvvm.so* files (relative), wherever they are;
        layout_links: list of strings, the paths added for nvcc's plan (optional);
        shared_libs: dict, target name -> list of relative .so files (only present ones);
        lib_deps: dict, target name -> the names of other shared_libs targets it needs at
          link time (optional);
        real_archs, virtual_archs: lists of strings;
        exec_constraints: list of label strings for the toolchain.

    Returns:
      dict, `%{key}` -> string.
    """
    tool_files, toolkit_tools = _tools(sdk)
    values = {
        "tool_files": tool_files,
        "toolkit_tools": toolkit_tools,
        "path": sdk.path,
        "source": sdk.source,
        "version": sdk.version,
        "inc": sdk.include_dir,
        "lib": sdk.lib_dir,
        "libnvvm": quote_list(sdk.libnvvm, 4),
        "layout_links": quote_list(getattr(sdk, "layout_links", []), 4),
        "shared_libs": _libraries(sdk),
        "real": quote_list(sdk.real_archs, 4),
        "virtual": quote_list(sdk.virtual_archs, 4),
        "exec_constraints": quote_list(sdk.exec_constraints, 4),
    }
    return {"%{" + key + "}": value for key, value in values.items()}

def fill_template(template, substitutions):
    """What `repository_ctx.template` writes: `template` with each key replaced in turn.

    Fails on a `%{` placeholder left, naming it: for tests, which render the templates
    without Bazel.

    Args:
      template: string, the template's text.
      substitutions: dict, placeholder -> string.

    Returns:
      string.
    """
    out = template
    for key, value in substitutions.items():
        out = out.replace(key, value)
    if "%{" in out:
        placeholder = out[out.index("%{"):].split("}")[0] + "}"
        fail("the template has a placeholder its substitutions do not fill: " + placeholder)
    return out

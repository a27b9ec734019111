"""What the C++ toolchain decides for the host side of nvcc's plan: its flags for the
compilation mode and for position-independent code, and the compilation outputs that
hand host objects to `cc_common` as rules_cc's cc_library does."""

load("@rules_cc//cc:defs.bzl", "cc_common")

def configure_cc_features(ctx, cc_toolchain, unsupported = []):
    """The target's C++ feature configuration (its `features`, less `unsupported`)."""
    return cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features + unsupported,
    )

def _cpp_compile_flags(ctx, cc_toolchain, unsupported = [], use_pic = False):
    feature_configuration = configure_cc_features(ctx, cc_toolchain, unsupported)
    variables = cc_common.create_compile_variables(
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        use_pic = use_pic,
    )
    return cc_common.get_memory_inefficient_command_line(
        feature_configuration = feature_configuration,
        action_name = "c++-compile",
        variables = variables,
    )

def compilation_mode_flags(ctx, cc_toolchain):
    """The C++ toolchain's own flags for `-c dbg|fastbuild|opt` (e.g. `-g`; `-O2
    -DNDEBUG ...`): its c++-compile command line with the mode's feature, less the one
    without. They reach every host compiler call of nvcc's plan as `-Xcompiler`."""
    mode = ctx.var["COMPILATION_MODE"]
    without = _cpp_compile_flags(ctx, cc_toolchain, [mode])
    return [f for f in _cpp_compile_flags(ctx, cc_toolchain) if f not in without]

def pic_flags(ctx, cc_toolchain):
    """The C++ toolchain's flags for position-independent code (`-fPIC`) when it builds
    PIC objects for shared libraries (its `needs_pic_for_dynamic_libraries`, which
    `--force_pic` turns on too), as rules_cc's cc_library decides; else none.

    A PIC object serves executables as well, so a target compiles once: PIC where the
    toolchain wants PIC for shared libraries, plain objects where it does not."""
    feature_configuration = configure_cc_features(ctx, cc_toolchain)
    if not cc_toolchain.needs_pic_for_dynamic_libraries(
        feature_configuration = feature_configuration,
    ):
        return []
    without = _cpp_compile_flags(ctx, cc_toolchain)
    return [f for f in _cpp_compile_flags(ctx, cc_toolchain, use_pic = True) if f not in without]

def compilation_outputs(objects, pic):
    """`cc_common` compilation outputs of host objects, PIC (`pic_flags` not empty) or not."""
    if pic:
        return cc_common.create_compilation_outputs(
            objects = depset(objects),
            pic_objects = depset(objects),
        )
    return cc_common.create_compilation_outputs(objects = depset(objects))

"""A user's rule built on the public emitters (//rules_cuda_split:actions.bzl), and the
analysis tests that check what it emits: the proof that another rule can call them."""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain")
load(
    "//rules_cuda_split:actions.bzl",
    "STEP_RULE_ATTRS",
    "STEP_RULE_TOOLCHAINS",
    "TOOLCHAIN_TYPE",
    "emit_compile_split",
    "resolve_archs",
)
load(":analysis_tests.bzl", "failure_test")

# Build settings by Label: a string in config_settings would name skylib's repository.
_ARCHS = str(Label("//cuda:archs"))
_MODE = str(Label("//cuda:compile_mode"))

def _compile_one_impl(ctx):
    toolchain = ctx.toolchains[TOOLCHAIN_TYPE].cuda
    compiled = emit_compile_split(
        ctx,
        src = ctx.file.src,
        groups = resolve_archs(ctx, toolchain),
        nvcc_flags = [],
        toolchain = toolchain,
        cc_toolchain = find_cc_toolchain(ctx),
        headers = depset(),
    )
    return [DefaultInfo(files = depset([compiled.obj]))]

compile_one = rule(
    implementation = _compile_one_impl,
    doc = "Compiles one `.cu` source into an object with the public emit_compile_split.",
    attrs = dict({
        "src": attr.label(allow_single_file = [".cu"], doc = "The source."),
        "archs": attr.string(doc = "Arch spec, overriding --//cuda:archs."),
    }, **STEP_RULE_ATTRS),
    fragments = ["cpp"],
    toolchains = STEP_RULE_TOOLCHAINS,
)

def _public_emitter_impl(ctx):
    env = analysistest.begin(ctx)
    mnemonics = sorted([a.mnemonic for a in analysistest.target_actions(env)])
    asserts.equals(
        env,
        ["CudaCicc", "CudaHostCompile", "CudaPreprocess", "CudaPtxas"],
        mnemonics,
        "one source, one arch: one action per step of the split compile",
    )
    files = analysistest.target_under_test(env)[DefaultInfo].files.to_list()
    asserts.equals(env, ["a.o"], [f.basename for f in files], "the object")
    return analysistest.end(env)

public_emitter_test = analysistest.make(
    _public_emitter_impl,
    config_settings = {_ARCHS: "sm_90", _MODE: "split"},
)

public_emitter_failure_test = failure_test()

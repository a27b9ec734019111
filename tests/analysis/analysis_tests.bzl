"""Analysis tests of cuda_library: the actions it declares, without running them."""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")
load("@rules_cc//cc:defs.bzl", "CcInfo")

_ARCHS = str(Label("//cuda:archs"))
_MODE = str(Label("//cuda:compile_mode"))
_ARCH_LIST = str(Label("//cuda:device_arch_list"))
_COPTS = str(Label("//cuda:copts"))

# Split mode, with an arch spec of a virtual arch with two real ones and a plain real arch.
_SPLIT_MIXED_ARCHS = {_ARCHS: "compute_80:sm_80,sm_86;sm_90", _MODE: "split"}

def _actions_by_mnemonic(env):
    counts = {}
    for action in analysistest.target_actions(env):
        counts[action.mnemonic] = counts.get(action.mnemonic, 0) + 1
    return counts

def _flag_after(argv, flag):
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None

def _arch_tokens(text):
    """Every sm_NN / compute_NN (with a/f suffix) in text."""
    found = {}
    for prefix in ["sm_", "compute_"]:
        for piece in text.split(prefix)[1:]:
            digits = ""
            for c in piece.elems():
                if c.isdigit() or (digits and c in "af" and len(digits) >= 2):
                    digits += c
                else:
                    break
            if digits:
                found[prefix + digits] = True
    return sorted(found.keys())

# 2 sources x 3 archs (compute_80:sm_80,sm_86 and sm_90: two virtual archs, three real).
def _action_counts_impl(ctx):
    env = analysistest.begin(ctx)
    counts = _actions_by_mnemonic(env)
    want = {
        # Host preprocess, cudafe++ and the device preprocess of both virtual archs: one
        # action a source.
        "CudaPreprocess": 2,
        "CudaCicc": 4,
        "CudaPtxas": 6,
        # fatbinary and the host compile: one action a source.
        "CudaHostCompile": 2,
    }
    for mnemonic, n in want.items():
        asserts.equals(env, n, counts.get(mnemonic, 0), "actions with mnemonic " + mnemonic)
    cuda = sorted([m for m in counts if m.startswith("Cuda")])
    asserts.equals(env, sorted(want.keys()), cuda, "the CUDA mnemonics")
    reports = analysistest.target_under_test(env)[OutputGroupInfo].cuda_arch_list.to_list()
    asserts.equals(
        env,
        [
            "a.compute_80.arch_list.txt",
            "a.compute_90.arch_list.txt",
            "b.compute_80.arch_list.txt",
            "b.compute_90.arch_list.txt",
        ],
        sorted([f.basename for f in reports]),
        "output group cuda_arch_list: one report per source and virtual arch",
    )
    return analysistest.end(env)

action_counts_test = analysistest.make(
    _action_counts_impl,
    config_settings = _SPLIT_MIXED_ARCHS,
)

def _own_arch_only_impl(ctx):
    env = analysistest.begin(ctx)
    seen = 0
    for action in analysistest.target_actions(env):
        if action.mnemonic not in ("CudaCicc", "CudaPtxas"):
            continue
        seen += 1
        arch = _flag_after(action.argv, "--arch")
        asserts.true(env, arch != None, "%s has --arch" % action.mnemonic)
        tokens = _arch_tokens(" ".join(action.argv))
        if action.mnemonic == "CudaCicc":
            asserts.equals(env, [arch], tokens, "archs named by the cicc action for " + arch)
        else:
            # ptxas names its real arch and the virtual arch whose PTX it reads.
            reals = [t for t in tokens if t.startswith("sm_")]
            asserts.equals(env, [arch], reals, "real archs named by the ptxas action for " + arch)
            asserts.equals(
                env,
                1,
                len([t for t in tokens if t.startswith("compute_")]),
                str(tokens),
            )
    asserts.equals(env, 10, seen, "cicc + ptxas actions")
    return analysistest.end(env)

own_arch_only_test = analysistest.make(
    _own_arch_only_impl,
    config_settings = _SPLIT_MIXED_ARCHS,
)

def _per_arch_list_impl(ctx):
    env = analysistest.begin(ctx)
    counts = _actions_by_mnemonic(env)
    asserts.equals(env, 4, counts.get("CudaDevicePreprocess", 0), "device preprocess actions")
    for action in analysistest.target_actions(env):
        if action.mnemonic == "CudaDevicePreprocess":
            arch = _flag_after(action.argv, "--arch")
            asserts.equals(
                env,
                [arch],
                _arch_tokens(" ".join(action.argv)),
                "per_arch: the device preprocess for %s names only it" % arch,
            )
    for action in analysistest.target_actions(env):
        if action.mnemonic in ("CudaCicc", "CudaPtxas"):
            # The preprocessor's options reach neither tool (the device preprocess's
            # output carries them).
            asserts.equals(
                env,
                [],
                [a for a in action.argv if a.startswith(("--nvcc-flag=-D", "--nvcc-flag=-I"))],
                "%s passes no -D or -I" % action.mnemonic,
            )
        elif action.mnemonic.startswith("Cuda"):
            for define in ["CUB_DISABLE_NAMESPACE_MAGIC", "THRUST_DISABLE_ABI_NAMESPACE"]:
                asserts.true(
                    env,
                    "--nvcc-flag=-D" + define in action.argv,
                    "%s of a per_arch build passes -D%s" % (action.mnemonic, define),
                )
    return analysistest.end(env)

per_arch_list_test = analysistest.make(
    _per_arch_list_impl,
    config_settings = dict(_SPLIT_MIXED_ARCHS.items() + [(_ARCH_LIST, "per_arch")]),
)

def _expect_failure_impl(ctx):
    env = analysistest.begin(ctx)
    asserts.expect_failure(env, ctx.attr.message)
    return analysistest.end(env)

def failure_test(config_settings = {}):
    """The rule of analysis tests that their target fails with `message` (a part of the
    error), built under `config_settings`."""
    return analysistest.make(
        _expect_failure_impl,
        expect_failure = True,
        attrs = {"message": attr.string()},
        config_settings = config_settings,
    )

per_arch_list_mono_test = failure_test({_MODE: "mono", _ARCH_LIST: "per_arch"})

def _mono_impl(ctx):
    env = analysistest.begin(ctx)
    counts = _actions_by_mnemonic(env)
    asserts.equals(env, 2, counts.get("CudaCompileMono", 0), "one nvcc action per source")
    asserts.equals(env, 0, counts.get("CudaCicc", 0), "no split actions in mono mode")
    return analysistest.end(env)

mono_test = analysistest.make(
    _mono_impl,
    config_settings = {_ARCHS: "sm_80,sm_90", _MODE: "mono"},
)

bad_archs_test = failure_test()

bad_flag_archs_test = failure_test({_ARCHS: "sm_90,sm_4x"})

spaced_flag_archs_test = failure_test({_ARCHS: "sm_80 compute_90"})

def _nvlink_per_arch_impl(ctx):
    env = analysistest.begin(ctx)
    counts = _actions_by_mnemonic(env)
    asserts.equals(env, 3, counts.get("CudaNvlink", 0), "one nvlink action per real arch")
    asserts.equals(env, 1, counts.get("CudaLinkFatbinary", 0), "one fatbinary -link")
    asserts.equals(env, 1, counts.get("CudaLinkStub", 0), "one link.stub compile")
    asserts.equals(env, 1, counts.get("CudaRegister", 0), "one registration file")
    for action in analysistest.target_actions(env):
        if action.mnemonic != "CudaNvlink":
            continue
        arch = _flag_after(action.argv, "--arch")
        asserts.equals(
            env,
            ["sm_80", "sm_86", "sm_90"],
            [t for t in _arch_tokens(" ".join(action.argv)) if t.startswith("sm_")],
            "nvlink for " + arch + " names every linked arch, as nvcc -dlink's plan does",
        )
        cubins = [f.basename for f in action.inputs.to_list() if f.basename.endswith(".cubin")]
        asserts.equals(
            env,
            2,
            len(cubins),
            "nvlink for %s reads one cubin per rdc source: %s" % (arch, cubins),
        )
        for name in cubins:
            asserts.true(
                env,
                name.endswith("." + arch + ".cubin"),
                "%s is an %s cubin" % (name, arch),
            )
    return analysistest.end(env)

nvlink_per_arch_test = analysistest.make(
    _nvlink_per_arch_impl,
    config_settings = _SPLIT_MIXED_ARCHS,
)

def _no_rdc_no_link_impl(ctx):
    env = analysistest.begin(ctx)
    counts = _actions_by_mnemonic(env)
    asserts.equals(env, 0, counts.get("CudaNvlink", 0), "no rdc below: no device link")
    return analysistest.end(env)

no_rdc_no_link_test = analysistest.make(_no_rdc_no_link_impl)

# Flags in the step actions: compilation modes, device debug, the build's copts, -t.

def _flags_impl(ctx):
    env = analysistest.begin(ctx)
    actions = [a for a in analysistest.target_actions(env) if a.mnemonic == ctx.attr.mnemonic]
    asserts.true(env, len(actions) > 0, "no %s action" % ctx.attr.mnemonic)
    for action in actions:
        for flag in ctx.attr.present:
            asserts.true(
                env,
                flag in action.argv,
                "%s passes %s: %s" % (action.mnemonic, flag, action.argv),
            )
        for flag in ctx.attr.absent:
            asserts.false(
                env,
                flag in action.argv,
                "%s does not pass %s: %s" % (action.mnemonic, flag, action.argv),
            )
    for want in ctx.attr.outputs:
        found = [
            f.short_path
            for a in actions
            for f in a.outputs.to_list()
            if f.short_path.endswith(want)
        ]
        asserts.equals(env, 1, len(found), "one %s output ending in %s" % (ctx.attr.mnemonic, want))
    return analysistest.end(env)

_FLAGS_ATTRS = {
    "mnemonic": attr.string(doc = "The actions to check."),
    "present": attr.string_list(doc = "Arguments each of them has."),
    "absent": attr.string_list(doc = "Arguments none of them has."),
    "outputs": attr.string_list(doc = "Path endings of outputs, each of exactly one of them."),
}

flags_test = analysistest.make(
    _flags_impl,
    attrs = _FLAGS_ATTRS,
    config_settings = {_MODE: "split"},
)

flags_dbg_test = analysistest.make(
    _flags_impl,
    attrs = _FLAGS_ATTRS,
    config_settings = {_MODE: "split", "//command_line_option:compilation_mode": "dbg"},
)

flags_opt_test = analysistest.make(
    _flags_impl,
    attrs = _FLAGS_ATTRS,
    config_settings = {_MODE: "split", "//command_line_option:compilation_mode": "opt"},
)

flags_mono_test = analysistest.make(
    _flags_impl,
    attrs = _FLAGS_ATTRS,
    config_settings = {_MODE: "mono"},
)

flags_build_copts_test = analysistest.make(
    _flags_impl,
    attrs = _FLAGS_ATTRS,
    config_settings = {_MODE: "split", _COPTS: ["-lineinfo", "--threads=2"]},
)

build_copts_refused_test = failure_test({_COPTS: ["-lineinfo", "-ptx"]})

# Output groups: of a cuda_library in either mode, and of a cuda_binary (its library,
# the libraries along its deps, and the device link).

def _output_groups_impl(ctx):
    env = analysistest.begin(ctx)
    groups = analysistest.target_under_test(env)[OutputGroupInfo]
    for name, want in [
        ("cuda_ptx", ctx.attr.ptx),
        ("cuda_cubin", ctx.attr.cubin),
        ("cuda_fatbin", ctx.attr.fatbin),
    ]:
        got = sorted([f.basename for f in getattr(groups, name).to_list()])
        asserts.equals(env, sorted(want), got, "output group " + name)
    return analysistest.end(env)

_GROUP_ATTRS = {
    "ptx": attr.string_list(doc = "Basenames of cuda_ptx."),
    "cubin": attr.string_list(doc = "Basenames of cuda_cubin."),
    "fatbin": attr.string_list(doc = "Basenames of cuda_fatbin."),
}

output_groups_test = analysistest.make(
    _output_groups_impl,
    attrs = _GROUP_ATTRS,
    config_settings = {_ARCHS: "sm_90", _MODE: "split"},
)

output_groups_mono_test = analysistest.make(
    _output_groups_impl,
    attrs = _GROUP_ATTRS,
    config_settings = {_ARCHS: "sm_90", _MODE: "mono"},
)

# A cuda_library's dependents get the CUDA runtime's headers (as with rules_cuda), so a
# cc_binary of a .cpp can include <cuda_runtime.h>.
def _runtime_headers_impl(ctx):
    env = analysistest.begin(ctx)
    headers = analysistest.target_under_test(env)[CcInfo].compilation_context.headers.to_list()
    asserts.true(
        env,
        "cuda_runtime.h" in [h.basename for h in headers],
        "cuda_runtime.h among the headers",
    )
    return analysistest.end(env)

runtime_headers_test = analysistest.make(_runtime_headers_impl)

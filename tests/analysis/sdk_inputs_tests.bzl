"""Analysis tests of the SDK files each action declares: only the tool it runs (with nvcc
and nvcc.profile, which every dryrun reads) and the headers it reads."""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts")

# Build settings by Label: a string in config_settings would name skylib's repository.
_ARCHS = str(Label("//cuda:archs"))
_MODE = str(Label("//cuda:compile_mode"))

# The SDK's tools and single files by basename (libnvvm's name carries its version).
_TOOLS = [
    "nvcc",
    "nvcc.profile",
    "cudafe++",
    "cicc",
    "libdevice.10.bc",
    "ptxas",
    "fatbinary",
    "nvlink",
    "bin2c",
    "libcudadevrt.a",
    "link.stub",
]

def _summary(action):
    """The SDK inputs of `action` as `tool,tool,...|headers`.

    The headers: `all` (with CCCL), `host` (without), a short list by basename, `none`.
    """
    tools = {}
    headers = []
    cccl = False
    for f in action.inputs.to_list():
        # The SDK's repository: external/cuda_13_0 (WORKSPACE), external/_main~cuda~... .
        parts = f.path.split("/")
        if len(parts) < 2 or parts[0] != "external" or "cuda" not in parts[1]:
            continue
        if "/include/" in f.path:
            headers.append(f.basename)
            cccl = cccl or "/include/cccl/" in f.path
        elif f.basename in _TOOLS:
            tools[f.basename] = True
        elif f.basename.startswith("libnvvm"):
            tools["libnvvm"] = True
        else:
            tools[f.basename] = True
    if cccl:
        kind = "all"
    elif len(headers) > 10:
        kind = "host"
    elif headers:
        kind = ",".join(sorted(headers))
    else:
        kind = "none"
    return ",".join(sorted(tools.keys())) + "|" + kind

def _sdk_inputs_impl(ctx):
    env = analysistest.begin(ctx)
    seen = {}
    for action in analysistest.target_actions(env):
        if not action.mnemonic.startswith("Cuda"):
            continue
        seen[action.mnemonic] = True
        asserts.equals(
            env,
            ctx.attr.expected.get(action.mnemonic, "<not expected>"),
            _summary(action),
            "the SDK inputs of a %s action" % action.mnemonic,
        )
    asserts.equals(env, sorted(ctx.attr.expected.keys()), sorted(seen.keys()), "mnemonics")
    return analysistest.end(env)

_ATTRS = {
    "expected": attr.string_dict(
        doc = "Each mnemonic's `tools|headers` summary (see _summary).",
        mandatory = True,
    ),
}

sdk_inputs_test = analysistest.make(
    _sdk_inputs_impl,
    attrs = _ATTRS,
    config_settings = {_ARCHS: "sm_90", _MODE: "split"},
)

sdk_inputs_mono_test = analysistest.make(
    _sdk_inputs_impl,
    attrs = _ATTRS,
    config_settings = {_ARCHS: "sm_90", _MODE: "mono"},
)

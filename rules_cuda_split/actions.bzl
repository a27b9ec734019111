"""Public API: the action emitters, for macros' rules and other rules that emit CUDA
actions themselves. `cuda_library`, `cuda_device_link` and `cuda_audit_test` are built
from these; each takes keyword arguments and fails at once when one is missing.

A rule that calls the step emitters (compile and device link) needs the step runner and
the toolchains: `attrs = dict(your_attrs, **STEP_RULE_ATTRS)`, `toolchains =
STEP_RULE_TOOLCHAINS`, `fragments = ["cpp"]`; `ctx.toolchains[TOOLCHAIN_TYPE].cuda` is
the CudaToolchainInfo, rules_cc's `find_cc_toolchain(ctx)` the C++ toolchain, and
`resolve_archs(ctx, toolchain)` the parsed arch spec (the rule's `archs` attribute, else
`--@rules_cuda_split//cuda:archs`; the rule needs a string attribute `archs`).

- `emit_compile_split(ctx, *, src, groups, nvcc_flags, toolchain, cc_toolchain, headers,
  device_nvcc_flags = None, per_arch_list = False)`: one source, one action per step
  and arch (`CudaPreprocess`, `CudaCicc`, `CudaPtxas`, `CudaHostCompile`). `src`: the
  `.cu` File; `groups`: the parsed arch spec; `nvcc_flags`: list of nvcc flags (no
  arch flags); `headers`: depset of the headers it may include. Returns
  `struct(obj, files, ptx, cubins, fatbins, traces)`: the object, a dict of every file
  by role (`module_id`, `cubin:sm_90`, ...), and lists of the PTX, cubins, `.fatbin`
  and, with `--@rules_cuda_split//cuda:time_trace=true` (read through STEP_RULE_ATTRS),
  each cicc and ptxas action's compile-time trace.
- `emit_compile_mono(ctx, *, src, groups, nvcc_flags, toolchain, cc_toolchain,
  headers)`: one `CudaCompileMono` action, nvcc's whole plan. Returns the same struct;
  `ptx`, `cubins` and `fatbins` are a directory each, `files` has `module_id` only,
  `traces` is empty.
- `emit_device_link(ctx, *, rdc, groups, toolchain, cc_toolchain, host_flags = [])`:
  the device link of a CudaRdcInfo (`CudaNvlink` per arch, `CudaRegister`,
  `CudaLinkFatbinary`, `CudaLinkStub`). Returns `struct(obj, cubins)`: the object to
  link into the binary, the linked cubins.
- `emit_audit(ctx, *, files, audit_tool, gpus, require, subject)`: one `CudaAudit`
  action auditing `files` (the `audit_tool` is `//tools:audit`'s file). Returns
  `struct(report, status)`.
- `emit_audit_test_script(ctx, *, report, status)`: a test executable that prints the
  report and exits with the status. Returns the File.

Output files are declared under `_cuda/<target name>/` (compile: per source; the audit:
`<target name>.audit.txt`): one call per source, and one device link and one audit per
target.
"""

load(
    "//rules_cuda_split/private/actions:audit.bzl",
    _emit_audit = "emit_audit",
    _emit_audit_test_script = "emit_audit_test_script",
)
load(
    "//rules_cuda_split/private/actions:compile.bzl",
    _emit_compile_mono = "emit_compile_mono",
    _emit_compile_split = "emit_compile_split",
)
load("//rules_cuda_split/private/actions:device_link.bzl", _emit_device_link = "emit_device_link")
load(
    "//rules_cuda_split/private/rules:common.bzl",
    _STEP_RULE_ATTRS = "STEP_RULE_ATTRS",
    _STEP_RULE_TOOLCHAINS = "STEP_RULE_TOOLCHAINS",
    _TOOLCHAIN_TYPE = "TOOLCHAIN_TYPE",
    _resolve_archs = "resolve_archs",
)

emit_compile_split = _emit_compile_split
emit_compile_mono = _emit_compile_mono
emit_device_link = _emit_device_link
emit_audit = _emit_audit
emit_audit_test_script = _emit_audit_test_script

STEP_RULE_ATTRS = _STEP_RULE_ATTRS
STEP_RULE_TOOLCHAINS = _STEP_RULE_TOOLCHAINS
TOOLCHAIN_TYPE = _TOOLCHAIN_TYPE
resolve_archs = _resolve_archs

"""The rules' model of nvcc's plan: step kinds, arch syntax, file names, the steps of a
source and of a device link, and the table of actions that run them.

This is the one Starlark definition of each; its Python counterpart is
`tools/cuda_split/core/plan.py` (which derives the steps from nvcc's own `--dryrun`), and
`tests/core/test_plan_model.py` checks that the two agree (kinds, file names, mnemonics) and
that the steps predicted here are the ones nvcc's dryrun (`-c`, and `-dlink` for a device
link) has for the same flags.

The façade of the model's files, one concept each, which both front ends (the Bazel rules'
private/actions and private/rules, Buck2's buck2/cuda) and the tests load through it:
  - vocabulary.bzl: the step and link kinds, the file names of roles, the actions and
    their mnemonics (generated; re-exported here);
  - arch_spec.bzl: the arch-spec grammar (parse_arch_spec, gencode, unsupported_archs,
    tile_arch_error), and a target's spec checked against its SDK (resolve_arch_spec);
  - source_plan.bzl: one source's steps (source_steps, step_roles, files_by_arch);
  - action_groups.bzl: the grouping of a source's steps into actions (source_actions);
  - naming.bzl: file names and directories, traces, the random seed;
  - compile_plan.bzl: one source's compile as data, every action with what it reads,
    writes and passes (compile_actions), and the checks of the flags (compile_check),
    which both front ends only turn into actions;
  - link_plan.bzl: the device link (link_archs, link_steps, missing_device_code), and
    its actions as data (link_actions), which both front ends only render.

Pure functions and constants, no Bazel APIs, so the same files run under a plain Starlark
interpreter in the tests (tests/support/plan_bzl.py) and under Buck2.

Errors: no function of these files calls `fail()`. One that can refuse its input returns
the refusal: a (value, error) pair (`parse_arch_spec`, `role_paths`), or an error message
("" for none: `tile_arch_error`) or the list of what is wrong (`unsupported_archs`,
`missing_device_code`), empty for nothing. The front end fails with it, naming the target;
a test asserts on it.
"""

load(
    "//rules_cuda_split/private/model:action_groups.bzl",
    _source_actions = "source_actions",
)
load(
    "//rules_cuda_split/private/model:arch_spec.bzl",
    _ACCEPTED_FORMS = "ACCEPTED_FORMS",
    _codes_of = "codes_of",
    _gencode = "gencode",
    _parse_arch_spec = "parse_arch_spec",
    _resolve_arch_spec = "resolve_arch_spec",
    _tile_arch_error = "tile_arch_error",
    _unsupported_archs = "unsupported_archs",
)
load(
    "//rules_cuda_split/private/model:compile_plan.bzl",
    _compile_actions = "compile_actions",
    _compile_check = "compile_check",
)
load(
    "//rules_cuda_split/private/model:link_plan.bzl",
    _link_actions = "link_actions",
    _link_archs = "link_archs",
    _link_file_roles = "link_file_roles",
    _link_flags = "link_flags",
    _link_progress_args = "link_progress_args",
    _link_steps = "link_steps",
    _missing_device_code = "missing_device_code",
)
load(
    "//rules_cuda_split/private/model:naming.bzl",
    _file_name = "file_name",
    _random_seed_flags = "random_seed_flags",
    _role_paths = "role_paths",
    _source_dir = "source_dir",
    _source_stem = "source_stem",
    _time_trace_name = "time_trace_name",
)
load(
    "//rules_cuda_split/private/model:source_plan.bzl",
    _files_by_arch = "files_by_arch",
    _source_steps = "source_steps",
    _step_roles = "step_roles",
)
load(
    "//rules_cuda_split/private/model:vocabulary.bzl",
    _ACTIONS = "ACTIONS",
    _CICC = "CICC",
    _CUDAFE = "CUDAFE",
    _DEVICE_PREPROCESS = "DEVICE_PREPROCESS",
    _FATBINARY = "FATBINARY",
    _FIXED_NAMES = "FIXED_NAMES",
    _HOST_COMPILE = "HOST_COMPILE",
    _HOST_PREPROCESS = "HOST_PREPROCESS",
    _LINK_FATBINARY = "LINK_FATBINARY",
    _LINK_HOST_COMPILE = "LINK_HOST_COMPILE",
    _LINK_INPUT = "LINK_INPUT",
    _LINK_KINDS = "LINK_KINDS",
    _MNEMONICS = "MNEMONICS",
    _MONO = "MONO",
    _NVLINK = "NVLINK",
    _PER_ARCH_KINDS = "PER_ARCH_KINDS",
    _PER_ARCH_NAMES = "PER_ARCH_NAMES",
    _PTXAS = "PTXAS",
    _REGISTER = "REGISTER",
    _STEP_KINDS = "STEP_KINDS",
    _TILEIRAS = "TILEIRAS",
    _TILE_FATBINARY = "TILE_FATBINARY",
    _TILE_MODES = "TILE_MODES",
)

# The plan's vocabulary (step kinds, link kinds, file names of roles, the actions and
# their mnemonics): generated from tools/plan_vocabulary.json into vocabulary.bzl and
# tools/cuda_split/core/vocabulary.py (scripts/gen/plan_vocabulary.py); re-exported here.
HOST_PREPROCESS = _HOST_PREPROCESS
CUDAFE = _CUDAFE
DEVICE_PREPROCESS = _DEVICE_PREPROCESS
CICC = _CICC
PTXAS = _PTXAS
TILEIRAS = _TILEIRAS
TILE_FATBINARY = _TILE_FATBINARY
FATBINARY = _FATBINARY
HOST_COMPILE = _HOST_COMPILE
STEP_KINDS = _STEP_KINDS
PER_ARCH_KINDS = _PER_ARCH_KINDS
NVLINK = _NVLINK
LINK_FATBINARY = _LINK_FATBINARY
LINK_HOST_COMPILE = _LINK_HOST_COMPILE
LINK_KINDS = _LINK_KINDS
REGISTER = _REGISTER
MONO = _MONO
TILE_MODES = _TILE_MODES
LINK_INPUT = _LINK_INPUT
FIXED_NAMES = _FIXED_NAMES
PER_ARCH_NAMES = _PER_ARCH_NAMES
ACTIONS = _ACTIONS
MNEMONICS = _MNEMONICS

# The arch-spec grammar (arch_spec.bzl)
ACCEPTED_FORMS = _ACCEPTED_FORMS
codes_of = _codes_of
gencode = _gencode
parse_arch_spec = _parse_arch_spec
resolve_arch_spec = _resolve_arch_spec
tile_arch_error = _tile_arch_error
unsupported_archs = _unsupported_archs

# One source's steps (source_plan.bzl)
files_by_arch = _files_by_arch
source_steps = _source_steps
step_roles = _step_roles

# The grouping of steps into actions (action_groups.bzl)
source_actions = _source_actions

# File names and the random seed (naming.bzl)
file_name = _file_name
random_seed_flags = _random_seed_flags
role_paths = _role_paths
source_dir = _source_dir
source_stem = _source_stem
time_trace_name = _time_trace_name

# One source's compile as data, and the checks of its flags (compile_plan.bzl)
compile_actions = _compile_actions
compile_check = _compile_check

# The device link (link_plan.bzl)
link_actions = _link_actions
link_archs = _link_archs
link_file_roles = _link_file_roles
link_flags = _link_flags
link_progress_args = _link_progress_args
link_steps = _link_steps
missing_device_code = _missing_device_code

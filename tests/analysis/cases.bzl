"""Analysis tests declared from tables, one row a test, and the targets they check
(tests/analysis/BUILD.bazel calls each macro once)."""

load("//rules_cuda_split:cuda_device_link.bzl", "cuda_device_link")
load("//rules_cuda_split:cuda_library.bzl", "cuda_library")
load(
    ":analysis_tests.bzl",
    "bad_archs_test",
    "bad_flag_archs_test",
    "flags_build_copts_test",
    "flags_dbg_test",
    "flags_mono_test",
    "flags_opt_test",
    "flags_test",
    "output_groups_mono_test",
    "output_groups_test",
    "spaced_flag_archs_test",
)

# Malformed or unsupported arch specs, `:bad_archs_<i>`.
_BAD_SPECS = [
    "sm_9x",
    "compute_90:sm_80",
    "sm_99",
    "sm_90;lto_90",
    "sm_80,compute_90:compute_90,sm_90",
    "sm_8O",
    "sm_80,,sm_90",
]

# (test, the spec's index in _BAD_SPECS, a part of the message)
_BAD_SPEC_TESTS = [
    # A malformed arch (a letter O for a zero) names, besides the accepted forms, the archs
    # this SDK supports.
    (
        "bad_archs_malformed_lists_sdk_archs_test",
        5,
        "(archs = \"sm_8O\"): bad arch 'sm_8O' in 'sm_8O'; accepted forms: groups",
    ),
    (
        "bad_archs_malformed_sdk_archs_test",
        5,
        "stands alone between ';'s).\nCUDA 13.0.88 supports: sm_75, sm_80, sm_86",
    ),
    # A stray separator is refused, not skipped.
    (
        "bad_archs_empty_arch_test",
        6,
        "empty arch in 'sm_80,,sm_90': a ';' or ',' with no arch beside it",
    ),
    (
        "bad_archs_malformed_test",
        0,
        "bad arch 'sm_9x' in 'sm_9x'; accepted forms: groups separated by ';'; a group is " +
        "either",
    ),
    ("bad_archs_older_real_test", 1, "real arch 'sm_80' is older than virtual arch 'compute_90'"),
    (
        "bad_archs_unsupported_test",
        2,
        "(archs = \"sm_99\"): CUDA 13.0.88 does not support arch(s) compute_99, " +
        "sm_99.\nAccepted forms: groups separated by ';'",
    ),
    ("bad_archs_lto_test", 3, "virtual arch 'compute_90' heads two groups in 'sm_90;lto_90'"),
    # A `virtual:codes` group beside another without `;`: said so, with the spec meant.
    (
        "bad_archs_virtual_group_not_alone_test",
        4,
        "must stand alone between ';'s (did you mean 'sm_80;compute_90:compute_90,sm_90'?)",
    ),
]

def bad_spec_tests():
    """A library per malformed spec, and the tests that each is refused, naming why."""
    for i, spec in enumerate(_BAD_SPECS):
        cuda_library(name = "bad_archs_%d" % i, srcs = ["a.cu"], archs = spec, tags = ["manual"])
    for name, i, message in _BAD_SPEC_TESTS:
        bad_archs_test(name = name, message = message, target_under_test = ":bad_archs_%d" % i)

# (target, its cuda_library attributes, test, a part of the message)
_REFUSED = [
    # Tile compilation (nvcc --enable-tile, tileiras) with an SDK whose nvcc lacks it: refused,
    # naming the flag, the reason and the versions that have it (issue 33).
    (
        "tile_on_13_0",
        {"copts": ["--enable-tile"]},
        "tile_refused_by_a_version_without_it_test",
        "'--enable-tile' is not an option of CUDA 13.0.88's nvcc (tile compilation, " +
        "tileiras); the CUDA versions whose nvcc has it: 13.5",
    ),
    ("reserved_copt", {"copts": ["-arch=sm_90"]}, "reserved_copt_test", "copts may not contain " +
                                                                        "'-arch=sm_90'"),
    (
        "lto_without_rdc",
        {"archs": "lto_90"},
        "lto_without_rdc_test",
        "lto_ archs (-dlto) need relocatable device code: set rdc = True",
    ),
    (
        "refused_preprocess",
        {"copts": ["-O3", "--preprocess"]},
        "refused_preprocess_test",
        "copts may not contain '--preprocess': it changes what nvcc writes",
    ),
]

def refused_tests():
    """Libraries refused at analysis, and the tests that say so."""
    for target, attrs, name, message in _REFUSED:
        cuda_library(name = target, srcs = ["a.cu"], tags = ["manual"], **attrs)
        bad_archs_test(name = name, message = message, target_under_test = ":" + target)

# (library, its archs, device link, its archs, a part of the message)
_LINKS_MISSING_CODE = [
    (
        "rdc_sm90_only",
        "sm_90",
        "link_missing_arch",
        "sm_80,sm_90",
        "//tests/analysis:rdc_sm90_only has no device code for sm_80 (it has sm_90)",
    ),
    (
        "rdc_lto_only",
        "lto_90",
        "link_lto_as_plain",
        "sm_90",
        "//tests/analysis:rdc_lto_only has no device code for sm_90 (it has lto_90)",
    ),
]

def links_missing_code_tests():
    """Device links refused for an rdc library with no device code for one of their archs.

    Each message names the library and the archs (tests `<link>_test`)."""
    for lib, lib_archs, link, link_archs, message in _LINKS_MISSING_CODE:
        cuda_library(name = lib, srcs = ["a.cu"], archs = lib_archs, rdc = True, tags = ["manual"])
        cuda_device_link(name = link, archs = link_archs, tags = ["manual"], deps = [":" + lib])
        bad_archs_test(name = link + "_test", message = message, target_under_test = ":" + link)

# (test, target, mnemonic, the nvcc flags each of its actions has, those none has)
_FLAGS = [
    # -t is dropped from the split's steps, kept in mono.
    (flags_test, "threads_dropped_test", "threads", "CudaCicc", ["-lineinfo"], ["-t", "4"]),
    (flags_mono_test, "threads_kept_in_mono_test", "threads", "CudaCompileMono", ["-t", "4"], []),
    # The build's copts (--@rules_cuda_split//cuda:copts).
    (flags_build_copts_test, "build_copts_test", "two_sources", "CudaPreprocess", ["-lineinfo"], [
        "--threads=2",
    ]),
    # Compilation modes and device debug.
    (flags_test, "fastbuild_test", "two_sources", "CudaHostCompile", [], [
        "-Xcompiler=-g",
        "-Xcompiler=-DNDEBUG",
        "-G",
    ]),
    (flags_dbg_test, "dbg_test", "two_sources", "CudaHostCompile", ["-Xcompiler=-g"], ["-G"]),
    (flags_opt_test, "opt_test", "two_sources", "CudaPreprocess", [
        "-Xcompiler=-DNDEBUG",
        "-Xcompiler=-O2",
    ], []),
    (flags_test, "device_debug_test", "device_debug", "CudaCicc", ["-G"], []),
    # copts are tokenized as cc_library's.
    (flags_test, "copts_tokenized_test", "tokenized_copts", "CudaPreprocess", [
        "-DTOK_A=1",
        "-DTOK_B",
        "-DTOK_C=x y",
        "-lineinfo",
    ], ["-DTOK_A=1 -DTOK_B"]),
]

def flags_tests():
    """The nvcc flags (`--nvcc-flag=`) of a target's actions of one mnemonic."""
    for test, name, target, mnemonic, present, absent in _FLAGS:
        test(
            name = name,
            absent = ["--nvcc-flag=" + f for f in absent],
            mnemonic = mnemonic,
            present = ["--nvcc-flag=" + f for f in present],
            target_under_test = ":" + target,
        )

def flag_archs_tests():
    """The build's arch spec (--@rules_cuda_split//cuda:archs), refused when malformed."""
    for test, name, message in [
        (
            bad_flag_archs_test,
            "bad_flag_archs_test",
            "(--@rules_cuda_split//cuda:archs=sm_90,sm_4x): bad arch 'sm_4x' in 'sm_90,sm_4x'",
        ),
        (
            spaced_flag_archs_test,
            "spaced_flag_archs_test",
            "'sm_80 compute_90' in 'sm_80 compute_90': spaces are not separators: use ','",
        ),
    ]:
        test(name = name, message = message, target_under_test = ":flag_archs")

# (test, target, the stems of its CUDA sources, the endings of their cubin and ptx files)
_OUTPUT_GROUPS = [
    (output_groups_test, "library", "two_sources", ["a", "b"], ".sm_90.cubin", ".compute_90.ptx"),
    (output_groups_mono_test, "library", "two_sources", ["a", "b"], ".cubin", ".ptx"),
    (output_groups_test, "binary", "binary", ["a", "b"], ".sm_90.cubin", ".compute_90.ptx"),
    (output_groups_test, "binary_host_as_cuda", "binary_host_as_cuda", [
        "a",
        "host",
    ], ".sm_90.cubin", ".compute_90.ptx"),
]

def output_groups_tests():
    """The files of each output group (`<name>_output_groups[_mono]_test`)."""
    for test, name, target, stems, cubin, ptx in _OUTPUT_GROUPS:
        mono = "_mono" if test == output_groups_mono_test else ""
        test(
            name = "%s_output_groups%s_test" % (name, mono),
            cubin = [s + cubin for s in stems],
            fatbin = [s + ".fatbin" for s in stems],
            ptx = [s + ptx for s in stems],
            target_under_test = ":" + target,
        )

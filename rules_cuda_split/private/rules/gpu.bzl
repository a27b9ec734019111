"""GPU requests of tests: the execution properties that send a test action to a worker
with a GPU (`gpu_exec_properties`), and `cuda_gpu_check`, the build-time check that such
a GPU can run the device code of the test's binary and of every library it links.

A request is `"any"` (any GPU) or one arch, `"sm_XY"`. It becomes execution properties
from a template, `{"gpu": "{gpu}"}` by default (the property the backend of
scripts/reapi_backend.sh, BuildGrid, matches; `{gpu}` is the request), e.g. `{"Pool":
"gpu-{gpu}"}` for BuildBuddy's and EngFlow's executor pools (docs/remote.md).
"""

load("//rules_cuda_split:providers.bzl", "CudaInfo")
load("//rules_cuda_split/private/actions:audit.bzl", "emit_gpu_check")
load(
    "//rules_cuda_split/private/model:gpu_request.bzl",
    _DEFAULT_GPU_PROPERTIES = "DEFAULT_GPU_PROPERTIES",
    _gpu_exec_properties = "gpu_exec_properties",
    _validate_gpu = "validate_gpu",
)
load("//rules_cuda_split/private/model:labels.bzl", "label_text")

DEFAULT_GPU_PROPERTIES = _DEFAULT_GPU_PROPERTIES
gpu_exec_properties = _gpu_exec_properties
validate_gpu = _validate_gpu

GpuCheckInfo = provider(
    doc = "The build-time GPU check of a test's binary (`cuda_gpu_check`).",
    fields = {
        "status": "File: `0` when the GPU runs the binary, `1` when it cannot.",
        "message": "File: what is wrong (target, GPU, what the binary carries), or a " +
                   "line saying what runs.",
        "checked": "depset[File]: the libraries' checks (their actions fail the build " +
                   "when the GPU cannot run a library).",
    },
)

_LibrariesInfo = provider(
    doc = "The CUDA libraries along `deps`: their labels and own fatbins.",
    fields = {"libraries": "list[tuple[Label, depset[File]]]: each library, once or more."},
)

def _libraries_aspect_impl(target, ctx):
    own = [(target.label, target[CudaInfo].fatbins)] if CudaInfo in target else []
    deps = [d for d in getattr(ctx.rule.attr, "deps", []) if _LibrariesInfo in d]
    libraries = [lib for d in deps for lib in d[_LibrariesInfo].libraries]
    return [_LibrariesInfo(libraries = own + libraries)]

_libraries_aspect = aspect(
    implementation = _libraries_aspect_impl,
    attr_aspects = ["deps"],
    doc = "Collects the CUDA libraries (CudaInfo) along `deps`.",
)

def _cuda_gpu_check_impl(ctx):
    subject = ctx.attr.subject or label_text(ctx.label)
    libraries = {}
    for part in ctx.attr.parts:
        for label, fatbins in part[_LibrariesInfo].libraries:
            libraries[label] = fatbins
    checked = []
    for i, label in enumerate(sorted(libraries, key = str)):
        files = libraries[label].to_list()  # one library's own fatbins: a few files
        if not files:
            continue
        checked.append(emit_gpu_check(
            ctx,
            files = files,
            audit_tool = ctx.files._audit,
            gpu = ctx.attr.gpu,
            require = ctx.attr.require,
            subject = "%s (library %s)" % (subject, label_text(label)),
            name = "%s_lib%d_%s" % (ctx.label.name, i, label.name),
            fail_build = True,
        ).message)
    binary = emit_gpu_check(
        ctx,
        files = [ctx.executable.binary],
        audit_tool = ctx.files._audit,
        gpu = ctx.attr.gpu,
        require = ctx.attr.require,
        subject = subject,
        name = ctx.label.name,
        fail_build = False,
    )
    return [
        DefaultInfo(files = depset([binary.message, binary.status] + checked)),
        GpuCheckInfo(status = binary.status, message = binary.message, checked = depset(checked)),
    ]

cuda_gpu_check = rule(
    implementation = _cuda_gpu_check_impl,
    doc = "Checks at build time that a GPU `gpu` can run `binary` (the verdict, for " +
          "the test to read) and every CUDA library along `parts` (an action per " +
          "library, failing the build when it cannot). Its own target, so that these " +
          "actions run where compiles run, not on the GPU worker.",
    attrs = {
        "binary": attr.label(
            mandatory = True,
            executable = True,
            cfg = "target",
            doc = "The test's binary.",
        ),
        "parts": attr.label_list(
            aspects = [_libraries_aspect],
            doc = "The CUDA libraries (and what leads to them through `deps`) to check.",
        ),
        "gpu": attr.string(mandatory = True, doc = "The GPU, as `sm_XY`."),
        "require": attr.string(
            default = "sass-or-ptx",
            values = ["sass-or-ptx", "sass"],
            doc = "`sass-or-ptx`: the GPU runs SASS or JIT-compiles PTX; `sass`: SASS only.",
        ),
        "subject": attr.string(doc = "Who asks for the GPU (the test's label), for messages."),
        "_audit": attr.label(
            default = Label("//tools:audit"),
            allow_files = True,
            doc = "`cuda-split audit`, run by `python3`.",
        ),
    },
)

"""The host's CPU, one map for every SDK repository rule.

`repository_ctx.os.arch` (Java's `os.arch`: `amd64`, `aarch64`, `ppc64le`) names it; one
table says, for each CPU CUDA SDKs are made for, its `@platforms//cpu` constraint, the
`targets/` directories where NVIDIA's installers put its headers and libraries, and the
platform of NVIDIA's wheels.

The functions not taking `rctx` are pure, so tests run them without Bazel.
"""

# Each CPU: `cpu`, its @platforms//cpu constraint value (as Bazel 7's host platform names
# it); `target_dirs`, nvcc's _TARGET_DIR_ candidates, most likely first; `wheel_platform`,
# NVIDIA's wheels' and redistrib archives' platform ("" for none).
HOST_CPUS = {
    "x86_64": struct(
        cpu = "x86_64",
        target_dirs = ["targets/x86_64-linux"],
        wheel_platform = "linux-x86_64",
    ),
    "aarch64": struct(
        cpu = "aarch64",
        target_dirs = ["targets/sbsa-linux", "targets/aarch64-linux"],
        wheel_platform = "linux-sbsa",
    ),
    "ppc64le": struct(
        cpu = "ppc",
        target_dirs = ["targets/ppc64le-linux"],
        wheel_platform = "",
    ),
}

# The other names of those CPUs: Java's (`amd64`) and uname's on macOS (`arm64`).
_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}

def host_cpu(arch):
    """The HOST_CPUS entry of an `os.arch` value.

    Args:
      arch: string, `repository_ctx.os.arch` (or what `uname -m` prints).

    Returns:
      (struct from HOST_CPUS or None, error string or "").
    """
    name = _ARCH_ALIASES.get(arch, arch)
    if name in HOST_CPUS:
        return HOST_CPUS[name], ""
    return None, ("this host's CPU is \"%s\" (repository_ctx.os.arch), which no CUDA SDK is " +
                  "made for; supported: %s") % (
        arch,
        ", ".join(sorted(list(HOST_CPUS) + ["%s (%s)" % (a, c) for a, c in _ARCH_ALIASES.items()])),
    )

def wheel_platform(os_name, arch):
    """NVIDIA's platform name for the host (`linux-x86_64`, `linux-sbsa`), "" if none.

    Args:
      os_name: string, `repository_ctx.os.name`.
      arch: string, `repository_ctx.os.arch`.

    Returns:
      string.
    """
    host, _ = host_cpu(arch)
    if not os_name.startswith("linux") or not host:
        return ""
    return host.wheel_platform

def repository_host(rctx, rule):
    """The host's HOST_CPUS entry; fails naming the CPU and those supported.

    Args:
      rctx: the repository context.
      rule: string, the repository rule's name, for the message.

    Returns:
      struct from HOST_CPUS.
    """
    host, err = host_cpu(rctx.os.arch)
    if err:
        fail("%s(name = \"%s\"): %s." % (rule, rctx.name, err))
    return host

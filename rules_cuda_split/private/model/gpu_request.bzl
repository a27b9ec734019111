"""What a GPU request of a test is, and the execution properties it becomes (pure
Starlark: no rules, so tests run it with a plain Starlark interpreter)."""

DEFAULT_GPU_PROPERTIES = {"gpu": "{gpu}"}

def validate_gpu(gpu, where):
    """Fails unless `gpu` is a request: "" (none), "any" or "sm_XY" (XY digits).

    Args:
      gpu: string, the request.
      where: string, who made it, for the message.
    """
    if gpu in ("", "any"):
        return
    if not gpu.startswith("sm_") or not gpu[3:].isdigit():
        fail("%s: gpu = %r: want \"any\" or one arch as sm_XY (e.g. \"sm_90\")" % (where, gpu))

def gpu_exec_properties(gpu, properties = None, exec_group = "test"):
    """The execution properties that ask for a GPU, for the test action only.

    `cc_test(..., exec_properties = gpu_exec_properties("sm_90"))` sends the test of a
    plain `cc_test` over a `cuda_library` to a worker with an sm_90 GPU; its compile and
    link actions keep the target's other properties (the `test` execution group of test
    rules, native and Starlark, in Bazel 7 and later).

    Args:
      gpu: "any", or one arch as "sm_XY".
      properties: dict[string, string], the property template: each value's `{gpu}`
        becomes `gpu`. Default `{"gpu": "{gpu}"}`; `{"Pool": "gpu-{gpu}"}` for executor
        pools (BuildBuddy, EngFlow).
      exec_group: the execution group the keys are for ("test", what `cuda_test(gpu = )`
        uses too); "" for every action of the target.

    Returns:
      dict[string, string], for the target's `exec_properties`.
    """
    validate_gpu(gpu, "gpu_exec_properties")
    if not gpu:
        fail("gpu_exec_properties: gpu = \"\": want \"any\" or one arch as sm_XY")
    template = DEFAULT_GPU_PROPERTIES if properties == None else properties
    if not template:
        fail("gpu_exec_properties: properties is empty: want e.g. {\"gpu\": \"{gpu}\"}")
    prefix = exec_group + "." if exec_group else ""
    return {prefix + k: v.replace("{gpu}", gpu) for k, v in template.items()}

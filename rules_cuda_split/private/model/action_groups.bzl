"""The grouping of a source's steps into actions: which steps share one action (one
interpreter, one dryrun, one sandbox) and the ACTIONS key (vocabulary.bzl) of each.

Part of the plan model (plan.bzl states its error convention: errors are returned).
"""

load(
    "//rules_cuda_split/private/model:vocabulary.bzl",
    "CUDAFE",
    "DEVICE_PREPROCESS",
    "FATBINARY",
    "HOST_COMPILE",
    "HOST_PREPROCESS",
)

# Steps that run in the action of the step before them: both see every arch and run
# once a source, so one action (one interpreter, one dryrun, one sandbox) does both.
_JOINS_PREVIOUS = {
    CUDAFE: HOST_PREPROCESS,
    HOST_COMPILE: FATBINARY,
}

def _action_key(kinds):
    """The ACTIONS key of an action's kinds: the kinds in order, once each, without the
    arch of a `kind:arch` entry."""
    key = []
    for k in kinds:
        name = k.split(":")[0]
        if name not in key:
            key.append(name)
    return "+".join(key)

def _joined(action, step, kind):
    """`action` with `step` run after its steps (as `kind`: `device_preprocess:<arch>`
    where the step's arch is not the action's)."""
    written = action.outputs + step.outputs
    kinds = action.kinds + [kind]
    return struct(
        kinds = kinds,
        key = _action_key(kinds),
        arch = action.arch,
        inputs = action.inputs + [
            r
            for r in step.inputs
            if r not in written and r not in action.inputs
        ],
        outputs = written,
        names = action.names + [r for r in step.names if r not in action.names],
        nvcc_flags = action.nvcc_flags,
    )

def source_actions(steps):
    """The steps of a source grouped into actions: cudafe++ with the host preprocess,
    and with them the device preprocess of every arch where it sees every arch of the
    build (its command names them all, as nvcc's does, so a per-arch action would not
    make its key any less dependent on the other archs: nvcc makes its output depend on
    them through `__CUDA_ARCH_LIST__`); the host compile with fatbinary; every other
    step alone (cicc and ptxas: one action per arch, keyed by their own arch only).

    Args:
      steps: the result of source_steps.

    Returns:
      A list of struct(kinds, key, arch, inputs, outputs, names, nvcc_flags): the
      steps' kinds in order (`kind:arch` for a step whose arch is not the action's),
      the action's ACTIONS key, and the roles the action reads (those no step of it
      writes), writes and names.
    """
    actions = []
    for step in steps:
        first = actions[0] if actions else None
        if (
            step.kind == DEVICE_PREPROCESS and first and
            first.kinds[0] == HOST_PREPROCESS and step.nvcc_flags == first.nvcc_flags
        ):
            actions[0] = _joined(first, step, step.kind + ":" + step.arch)
        elif actions and _JOINS_PREVIOUS.get(step.kind) == actions[-1].kinds[-1]:
            actions.append(_joined(actions.pop(), step, step.kind))
        else:
            actions.append(struct(
                kinds = [step.kind],
                key = step.kind,
                arch = step.arch,
                inputs = list(step.inputs),
                outputs = list(step.outputs),
                names = list(step.names),
                nvcc_flags = step.nvcc_flags,
            ))
    return actions

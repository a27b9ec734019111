"""Tests for scripts/aquery_digest.py, the action-graph identity check."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "aquery_digest", Path(__file__).resolve().parent.parent / "scripts" / "aquery_digest.py"
)
assert _SPEC and _SPEC.loader
aquery_digest = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(aquery_digest)

_ONE = """action 'Compiling a'
  Mnemonic: CudaCompile
  Target: //x:a
  Configuration: k8-fastbuild
  ActionKey: abc
  Inputs: [x/a.cu]
  Outputs: [bazel-out/k8-fastbuild/bin/x/a.o]
  Command Line: (exec python3 \\
    step.py \\
    --arch=sm_90)
"""
_TWO = """action 'Compiling b'
  Mnemonic: CudaCompile
  Target: //x:b
  Configuration: k8-fastbuild
  ActionKey: def
  Inputs: [x/b.cu]
  Outputs: [bazel-out/k8-fastbuild/bin/x/b.o]
  Command Line: (exec python3 \\
    step.py \\
    --arch=sm_90)
"""


def test_order_and_action_keys_do_not_matter() -> None:
    a = aquery_digest.actions(_ONE + "\n" + _TWO)
    b = aquery_digest.actions(_TWO.replace("def", "zzz") + "\n" + _ONE)
    assert aquery_digest.digest(a) == aquery_digest.digest(b)


def test_argv_change_is_detected() -> None:
    a = aquery_digest.actions(_ONE)
    b = aquery_digest.actions(_ONE.replace("sm_90", "sm_80"))
    assert aquery_digest.digest(a) != aquery_digest.digest(b)

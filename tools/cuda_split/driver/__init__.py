"""nvcc-split: an nvcc replacement that runs nvcc's own plan as a parallel, cached DAG.

    nvcc-split [driver options] -- <nvcc args>
    nvcc-split [driver options] /path/to/nvcc <nvcc args>   (CMAKE_CUDA_COMPILER_LAUNCHER)

For the common case, one `.cu` compiled to an object (`-c`, `-dc`, `-dw`, whole-program
or `-rdc`, with or without `-MD`/`-MMD` dependency files), the driver asks the real nvcc
for its plan of exactly that command (`nvcc --dryrun --keep --keep-dir KD <args>`, parsed
by `cuda_split.core.plan`), maps the plan's steps to a DAG by the files they pass, and runs the
steps on a pool of `-j` workers. The preprocessors', cudafe++'s, cicc's, ptxas's and
fatbinary's results are kept in a local content-addressed cache (`cuda_split.cache`).
Every command is nvcc's own, with only its intermediate files moved to a private
directory under the names nvcc gives them with `--keep`: the object is byte for byte the
one `nvcc --keep` writes (plain nvcc differs from it only by a temporary file's name in
the host object's symbol table).

Everything else (linking, `-dlink`, `-ptx`/`-cubin`/`-fatbin`, `-E`, `-M`, several
inputs, `--keep`, `-v`, flags the driver cannot read, a plan it does not understand) runs
the real nvcc unchanged; `--verbose` says why.
"""

from cuda_split.driver.cli import compile_split, main, passthrough
from cuda_split.driver.common import PROG, Node, Unsplittable
from cuda_split.driver.dag import build_dag, strip_redirections
from cuda_split.driver.executor import load_limit, open_pool, run_dag
from cuda_split.driver.invocation import Invocation, Option, analyze, dependency_text, read_options
from cuda_split.driver.options import Options, parse_driver_args, split_command_line
from cuda_split.driver.preprocess import preprocess_depends_on_cwd
from cuda_split.driver.preprocess_cache import PREPROCESS_KINDS
from cuda_split.driver.runner import Runner
from cuda_split.driver.step_cache import CACHED_KINDS

__all__ = [
    "CACHED_KINDS",
    "PREPROCESS_KINDS",
    "PROG",
    "Invocation",
    "Node",
    "Option",
    "Options",
    "Runner",
    "Unsplittable",
    "analyze",
    "build_dag",
    "compile_split",
    "dependency_text",
    "load_limit",
    "main",
    "open_pool",
    "parse_driver_args",
    "passthrough",
    "preprocess_depends_on_cwd",
    "read_options",
    "run_dag",
    "split_command_line",
    "strip_redirections",
]

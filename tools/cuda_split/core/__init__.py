"""The core every product of cuda_split shares: nvcc's plan (`plan`, its names in
`vocabulary`), a planned step's command rewritten for the build (`command`), the
`__CUDA_ARCH_LIST__` report (`archlist`) and compile-time trace flags (`time_trace`).

Standard library only, and importing nothing of cuda_split outside `core`: these modules
run inside every split action, beside the step runner (`cuda_split.runner`).
"""

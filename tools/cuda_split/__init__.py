"""Split nvcc compilation: nvcc's own --dryrun plan, run one step at a time."""

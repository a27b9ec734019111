"""Split nvcc compilation: nvcc's own --dryrun plan, run one step at a time.

By product: `core` (nvcc's plan, commands, arch list; shared by all) and `runner` (the
step runner inside every split action), both standard library only; `driver`
(`nvcc-split`), `remote` (its REAPI client) and `commands` (`cuda-split`). The modules at
this level are shared by the front ends: the local cache (`cache`, `file_notes`), nvcc's
option table (`nvcc_options`) and the hermetic form of a step (`hermetic`).
"""

#!/usr/bin/env bash
# Prepares the GPU lane (bench/gpu_lane.sh) here, where pip reaches PyPI: wheels of dace-ai's core, the CUDA
# target pack and the cuBLAS pack (built from this tree), and of DaCe 2 and what it and dace-ai need that the
# GPU machine's image lacks, for its Python (3.12, x86-64), in .whl (ignored by git; carried to the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir .whl
python3 -m pip wheel -q --no-deps -w .whl ./core ./plugins/targets/cuda ./plugins/environments/cublas
# DaCe 2 is published as a source distribution: built here into a pure-Python wheel.
python3 -m pip wheel -q --no-deps -w .whl -r .ci/dace2.txt
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
# What the image lacks (its package list: the device tool's KINDS.md): DaCe 2 and its pure-Python needs, and
# dace-ai's (pydantic; networkx below 3.6). The image's numpy, sympy, pyyaml, pluggy, filelock, rich,
# pytest, cmake and nvidia-cublas are used as they are.
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .whl astunparse dill fparser ply ordered-set 'networkx<3.6' pydantic pydantic-core annotated-types \
  typing-inspection
ls .whl | sed 's/^/  /'
du -sh .whl

#!/usr/bin/env bash
# The GPU lane, one command on a machine with an NVIDIA GPU and nvcc, nothing fetched: installs the wheels
# bench/gpu_lane_prepare.sh put in .whl, says what the machine is, then runs the GPU tests (DaCe's GPU build
# of every pattern the CUDA guidance teaches; gpu-verify on the device: a right kernel verified, a kernel and a
# cuBLAS call that skip the last element refused) and the GPU sample (levels, NumPy comparison, timings beside
# CuPy and cuBLAS), then bench/gpu_lane_check.py, which fails the lane unless every right answer of the sample
# is verified on the GPU and agrees with NumPy, every refusal test ran and passed, and the timings were taken;
# it writes the table of what ran where to $OUT/gpu_lane_table.md (CuPy comes with the GPU machine's image).
# Exit status: 0 when all of it passed. On the device tool:
#   bash bench/gpu_lane_prepare.sh     # here
#   run(command="bash bench/gpu_lane.sh", carry=[".whl"], timeout_s=420)
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu lane: installing the carried wheels failed"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader || true
nvcc --version | tail -n 2
echo "cmake: $(cmake --version | head -n 1)"
python3 -c 'import dace, dace_ai; print("DaCe", dace.__version__, "| dace-ai", dace_ai.__version__)'
python3 -m dace_ai.cli.main doctor 2>&1 | sed -n '1,4p'
status=0
out=${OUT:-.gpu-lane}
mkdir -p "$out"
python3 -c 'import cupy; print("CuPy", cupy.__version__)' || echo "gpu lane: no CuPy (the sample cannot run its programs)"
python3 -m pytest -q -p no:cacheprovider -o addopts='-ra --strict-markers' -n 4 --junitxml="$out/gpu_tests.xml" \
  tests/test_gpu_build.py tests/test_gpu_verify_device.py tests/test_gpu_sanitize.py tests/test_gpu_sample.py || status=1
python3 samples/gpu/gpu_sample.py --record "$out/gpu_sample.json" || status=1
# The lane's own verdict: fails when it proved less than it must (nothing ran, nothing compared, a refusal skipped).
python3 bench/gpu_lane_check.py "$out/gpu_sample.json" "$out/gpu_tests.xml" --table "$out/gpu_lane_table.md" || status=1
echo "gpu lane: $([ $status -eq 0 ] && echo PASS || echo FAIL) in $((SECONDS - start)) s (table: $out/gpu_lane_table.md)"
exit $status

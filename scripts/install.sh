#!/usr/bin/env bash
# Create .venv and install groundjudge into it with the extras named as arguments
# (for example: local, dev). Quiet by default; pass VERBOSE=1 to see pip's output.
#
# The embedded judge's server (llama-cpp-python) compiles llama.cpp from source once, about
# 12 minutes on 2 cores; pip keeps the built wheel, so later installs take seconds. The flags
# below build it for portable AVX2 rather than for this machine's own CPU: on machines whose
# CPU has AMX but whose kernel does not let processes use it (some VMs), a native build
# crashes at its first matrix product.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=$(IFS=,; echo "$*")
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"

if [ ! -x .venv/bin/python ]; then
    echo "groundjudge: creating .venv"
    python3 -m venv .venv
fi
log=.venv/install.log
echo "groundjudge: installing groundjudge[${extras}] into .venv (log: $log)"
if .venv/bin/python -c "import llama_cpp" 2>/dev/null; then :; elif [[ ",$extras," == *",local,"* ]]; then
    echo "groundjudge: the first install compiles llama.cpp (about 12 minutes on 2 cores)"
fi
started=$(date +%s)
if [ "${VERBOSE:-0}" = 1 ]; then
    .venv/bin/pip install -e ".[${extras}]" 2>&1 | tee "$log"
elif ! .venv/bin/pip install -e ".[${extras}]" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "groundjudge: the install failed; the last lines of $log are above" >&2
    exit 1
fi
echo "groundjudge: installed in $(( $(date +%s) - started )) s"

#!/usr/bin/env bash
# The main job on the default model: install what is missing, build, fetch SmolLM2-135M-Instruct
# (Q4_1) into ~/.cache/tessera/models/, and run it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DTS_BUILD_TESTS=OFF >/dev/null
cmake --build build -j "$(nproc)" --target tessera
model=$(python3 scripts/fetch_model.py smollm2)
./build/tessera run -m "$model" --chat -p "What is the capital of France? Answer in one sentence." \
    -n 64 --temp 0

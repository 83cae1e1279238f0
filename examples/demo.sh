#!/usr/bin/env bash
# `make demo`: kiln's main job on a real example. Grows as components land;
# until trace mode exists it shows the shared-memory map at work.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/shm-demo.sh"

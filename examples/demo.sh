#!/usr/bin/env bash
# `make demo`: kiln's main job on a real example. Grows as components land.
set -euo pipefail
echo "kiln demo: no component has landed yet" >&2
exit 1

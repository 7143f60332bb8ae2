#!/bin/sh
# The project's venv interpreter for Bazel (--python_path): Bazel resolves symlinks, which
# would lose the venv's site-packages, so this script runs the venv's python by path.
exec "$(dirname "$(readlink -f "$0")")/../.venv/bin/python" "$@"

#!/usr/bin/env bash
# Prints the README's install line tagged [TAG] (the command under the comment that ends
# with it), so the checks run exactly what the README tells a user to type.
# Usage: tools/release/readme-lines.sh TAG [README]
set -euo pipefail
tag=$1 readme=${2:-$(dirname "$0")/../../README.md}
line=$(awk -v tag="[$1]" 'index($0, "# ") == 1 && substr($0, length($0) - length(tag) + 1) == tag { getline; print; exit }' "$readme")
[ -n "$line" ] || { echo "readme-lines: README has no install line tagged [$tag]" >&2; exit 1; }
echo "$line"

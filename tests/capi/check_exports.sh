#!/usr/bin/env bash
# Asserts that the shared library exports exactly the functions the public header declares:
# every defined dynamic symbol starts with dhtc_, and every dhtc_ function in the header exists.
set -euo pipefail
lib=$1
header=$2

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -E '^DHTC_API' "$header" | grep -oE '\bdhtc_[a-z0-9_]+\s*\(' | sed -E 's/\s*\($//' | sort -u)

status=0
foreign=$(echo "$exported" | grep -v '^dhtc_' || true)
if [ -n "$foreign" ]; then
  echo "symbols exported without the dhtc_ prefix:"; echo "$foreign"; status=1
fi
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [ -n "$missing" ]; then
  echo "declared in the header but not exported:"; echo "$missing"; status=1
fi
undeclared=$(comm -23 <(echo "$exported" | grep '^dhtc_' || true) <(echo "$declared"))
if [ -n "$undeclared" ]; then
  echo "exported but not declared in the header:"; echo "$undeclared"; status=1
fi
[ $status -eq 0 ] && echo "exports OK: $(echo "$exported" | wc -l) dhtc_ symbols"
exit $status

#!/usr/bin/env bash
# Builds the DocC documentation of Coroutines, CoroutinesFoundation and QueuePool with the
# toolchain's `docc` and fails on any warning (a broken symbol link, an undocumented parameter).
# Symbol graphs come from a debug build with -emit-symbol-graph in its own scratch directory;
# the archives go to .build/docs/<Module>.doccarchive.
set -euo pipefail
cd "$(dirname "$0")/.."
# The graphs stay between runs: an incremental build writes only the changed modules' graphs.
graphs=.build/docs-build/symbol-graphs
rm -rf .build/docs
mkdir -p "$graphs" .build/docs
swift build --scratch-path .build/docs-build \
  -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$(pwd)/$graphs" >/dev/null
status=0
for module in Coroutines CoroutinesFoundation QueuePool; do
  dir=.build/docs/graphs-$module
  mkdir -p "$dir"
  # Only the module's own symbols: CoroutinesFoundation re-exports Coroutines, whose symbols
  # (documented in Coroutines' catalog) would otherwise appear again, with links it cannot
  # resolve. Extensions of other modules' types come in their own graphs (Module@Other).
  swift Scripts/own-symbols.swift "$graphs/$module.symbols.json" "Sources/$module" "$dir/$module.symbols.json"
  cp "$graphs/$module"@*.symbols.json "$dir/" 2>/dev/null || true
  log=.build/docs/$module.log
  docc convert "Sources/$module/$module.docc" --additional-symbol-graph-dir "$dir" \
    --fallback-display-name "$module" --fallback-bundle-identifier "swift-coroutines.$module" \
    --output-path ".build/docs/$module.doccarchive" >"$log" 2>&1 || status=1
  if grep -qE "^(warning|error):" "$log"; then
    cat "$log"
    echo "docs: $module has DocC warnings (above)"
    status=1
  else
    echo "docs: $module ok"
  fi
done
exit $status

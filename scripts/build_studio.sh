#!/usr/bin/env bash
# Build the studio front end (studio/web, vite + TypeScript) into src/preflab/studio/static.
# Usage: bash scripts/build_studio.sh [--force]
#   Without node/npm the committed prebuilt bundle is used (the studio works as is).
#   Skips the build when the bundle is newer than every source file (use --force to rebuild).
set -euo pipefail
cd "$(dirname "$0")/.."
WEB=studio/web
OUT=src/preflab/studio/static
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1

have_bundle() { [ -f "$OUT/index.html" ] && ls "$OUT"/assets/*.js >/dev/null 2>&1; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if have_bundle; then
    echo "build_studio: node/npm not found; using the prebuilt studio bundle in $OUT"
    exit 0
  fi
  echo "build_studio: node/npm not found and no prebuilt bundle in $OUT." >&2
  echo "  Install Node.js >= 20 (https://nodejs.org or apt-get install nodejs npm) and rerun," >&2
  echo "  or restore the committed bundle: git checkout -- $OUT" >&2
  exit 1
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  if have_bundle; then
    echo "build_studio: node $(node --version) is older than 20 (vite needs >= 20.19); using the prebuilt bundle"
    exit 0
  fi
  echo "build_studio: node $(node --version) is too old; install Node.js >= 20" >&2
  exit 1
fi

if [ "$FORCE" = 0 ] && have_bundle && [ -z "$(find "$WEB" -path "$WEB/node_modules" -prune -o -type f -newer "$OUT/index.html" -print | head -1)" ]; then
  echo "build_studio: studio bundle is up to date ($OUT)"
  exit 0
fi

echo "build_studio: npm ci && npm run build in $WEB"
(cd "$WEB" && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent)
echo "build_studio: built $OUT"

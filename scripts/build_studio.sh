#!/usr/bin/env bash
# Build the studio front end (studio/web, vite + TypeScript) into src/preflab/studio/static.
# Usage: bash scripts/build_studio.sh [--force | --check]
#   (no option)  Build when the front-end sources changed since the committed bundle was built:
#                the bundle records a SHA-256 of its sources in static/bundle.json (mtimes mean
#                nothing after a checkout). Without node >= 20 the committed bundle is used.
#   --force      Build even when the record matches (commit the result: static/ and bundle.json).
#   --check      CI (scripts/test.sh): with node >= 20, check that the generated API types match
#                studio/web/openapi.json, type-check (tsc --noEmit), build into a temporary folder
#                and fail when the committed bundle is not that build of the current sources.
#                Without node >= 20 it says so and succeeds (tests/studio/test_contract.py still
#                compares the recorded hash with the sources).
# The hash: sha256 of `sha256sum` lines ("HEX  PATH", paths relative to studio/web, sorted
# bytewise) of the files listed in SOURCES; tests/studio/test_contract.py recomputes it.
set -euo pipefail
cd "$(dirname "$0")/.."
WEB=studio/web
OUT=src/preflab/studio/static
RECORD=$OUT/bundle.json
SOURCES=(src index.html package.json package-lock.json vite.config.ts tsconfig.json)
MODE=build
case "${1:-}" in
  --force) MODE=force ;;
  --check) MODE=check ;;
  "") ;;
  *) echo "usage: bash scripts/build_studio.sh [--force | --check]" >&2; exit 2 ;;
esac

have_bundle() { [ -f "$OUT/index.html" ] && ls "$OUT"/assets/*.js >/dev/null 2>&1; }

sources_sha256() {
  (cd "$WEB" && find "${SOURCES[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) |
    sha256sum | cut -d' ' -f1
}

recorded_sha256() {
  [ -f "$RECORD" ] && sed -n 's/.*"sources_sha256": *"\([0-9a-f]*\)".*/\1/p' "$RECORD" || true
}

node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
    [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ]
}

check_api_types() {
  local tmp
  tmp=$(mktemp -d)
  (cd "$WEB" && npx --no-install openapi-typescript openapi.json -o "$tmp/api-types.ts" >/dev/null)
  if ! cmp -s "$tmp/api-types.ts" "$WEB/src/api-types.ts"; then
    rm -rf "$tmp"
    echo "build_studio: $WEB/src/api-types.ts is not generated from $WEB/openapi.json;" >&2
    echo "  run: python -m preflab.studio.openapi && (cd $WEB && npm run gen:api)" >&2
    exit 1
  fi
  rm -rf "$tmp"
}

if ! node_ok; then
  if [ "$MODE" = check ]; then
    echo "build_studio: node >= 20 not found; skipping the studio's type check and build check"
    exit 0
  fi
  if have_bundle; then
    echo "build_studio: node >= 20 / npm not found; using the prebuilt studio bundle in $OUT"
    exit 0
  fi
  echo "build_studio: node >= 20 / npm not found and no prebuilt bundle in $OUT." >&2
  echo "  Install Node.js >= 20 (https://nodejs.org or apt-get install nodejs npm) and rerun," >&2
  echo "  or restore the committed bundle: git checkout -- $OUT" >&2
  exit 1
fi

want=$(sources_sha256)
if [ "$MODE" = build ] && have_bundle && [ "$(recorded_sha256)" = "$want" ]; then
  echo "build_studio: studio bundle is up to date ($OUT, sources $want)"
  exit 0
fi

echo "build_studio: npm ci in $WEB"
(cd "$WEB" && npm ci --no-audit --no-fund --loglevel=error)
check_api_types
echo "build_studio: tsc --noEmit"
(cd "$WEB" && npm run typecheck --silent)

if [ "$MODE" = check ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$WEB" && npx --no-install vite build --logLevel warn --outDir "$tmp/static" --emptyOutDir)
  if [ "$(recorded_sha256)" != "$want" ] || ! diff -r -q -x bundle.json "$tmp/static" "$OUT" >/dev/null; then
    echo "build_studio: the committed bundle in $OUT is not a build of the current sources;" >&2
    echo "  run: bash scripts/build_studio.sh --force   and commit $OUT" >&2
    exit 1
  fi
  echo "build_studio: the committed bundle is the build of the current sources ($want)"
  exit 0
fi

echo "build_studio: vite build"
(cd "$WEB" && npx --no-install vite build --logLevel warn)
printf '{"sources_sha256": "%s"}\n' "$want" >"$RECORD"
echo "build_studio: built $OUT (sources $want)"

#!/usr/bin/env bash
# Builds everything the container image holds into OUT. The Dockerfile's
# build stage runs this script, and tools/deploycheck runs it on a copy of
# the build context (filtered by Dockerfile.dockerignore) to test the
# image's build steps on a machine without a Docker engine.
#
#   deploy/docker/build.sh OUT
#
#   OUT/bin/tollgate, OUT/bin/mockllm   static binaries (CGO_ENABLED=0)
#   OUT/plugins/NAME.wasm               every plugins/NAME/ (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared)
#   OUT/state/spool, OUT/state/cache    empty: the image's writable directories (the
#                                       call-log spool, the compiled-plugin cache), copied
#                                       with the runtime user as owner
#
# GOOS/GOARCH in the environment choose the binaries' platform (the
# Dockerfile passes the image's target platform); plugins are always wasm.
set -euo pipefail
out=${1:?usage: build.sh OUT}
mkdir -p "$out/bin" "$out/plugins" "$out/state/spool" "$out/state/cache"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."

export CGO_ENABLED=0
go build -trimpath -ldflags='-s -w' -o "$out/bin/" ./gateway/cmd/tollgate ./gateway/cmd/mockllm

# Every directory under plugins/ is one plugin (a Go main package), built
# the way `tollgate plugin build` builds it (gateway/wasm/wasmbuild).
for dir in plugins/*/; do
  name=$(basename "$dir")
  (cd "$dir" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o "$out/plugins/$name.wasm" .)
  echo "built plugins/$name.wasm ($(($(stat -c %s "$out/plugins/$name.wasm") / 1024)) KiB)"
done

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
#   OUT/state/spool                     empty: the call-log spool
#   OUT/state/cache/wazero              the compiled-plugin cache: the plugins of
#                                       deploy/docker/policy.yaml and the built-in ones,
#                                       compiled by `tollgate plugin warm` (not in a
#                                       cross build: see below)
#   The state directories are the image's writable ones, copied with the
#   runtime user as owner.
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
# the way `tollgate plugin build` builds it (sdk/wasmbuild).
for dir in plugins/*/; do
  name=$(basename "$dir")
  (cd "$dir" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o "$out/plugins/$name.wasm" .)
  echo "built plugins/$name.wasm ($(($(stat -c %s "$out/plugins/$name.wasm") / 1024)) KiB)"
done

# The compiled-plugin cache the image ships (/var/cache/tollgate/wazero), so
# a new container is ready in about a second instead of compiling its
# plugins for seconds (docs/SCALING.md, "Cold start"). wazero keys an entry
# on its own version, the OS and architecture, the module's SHA-256 and the
# CPU features its compiler uses (amd64: SSE4.1, BMI1, ABM; arm64: atomics),
# so on a node whose CPU lacks one the gateway compiles at start as before.
# A cross build cannot run its binary here and ships an empty cache. The
# variables only let the policy validate: nothing is connected to.
host_os=$(go env GOHOSTOS) host_arch=$(go env GOHOSTARCH)
if [[ ${GOOS:-$host_os} == "$host_os" && ${GOARCH:-$host_arch} == "$host_arch" ]]; then
  TOLLGATE_PLUGIN_DIR=$out/plugins TOLLGATE_DATABASE_URL=postgres://warm@127.0.0.1/warm TOLLGATE_ADMIN_TOKEN=warm \
    "$out/bin/tollgate" plugin warm -policy deploy/docker/policy.yaml -cache-dir "$out/state/cache/wazero"
  "$out/bin/tollgate" plugin warm -cache-dir "$out/state/cache/wazero"
  echo "compiled-plugin cache: $(du -sm "$out/state/cache/wazero" | cut -f1) MiB"
else
  echo "cross build (${GOOS:-$host_os}/${GOARCH:-$host_arch} on $host_os/$host_arch): the image ships no compiled-plugin cache"
fi

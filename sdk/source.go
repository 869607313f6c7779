//go:build !wasip1

package sdk

import "embed"

// Source is this module's own source, for hosts that vendor the SDK: its
// go.mod and go.sum, the guest SDK (this package and sdk/abi) and what a
// plugin's tests use (sdk/plugintest and the packages it imports).
// `tollgate plugin new` unpacks it so that a new plugin builds and tests
// without fetching the SDK. It is not part of a plugin's build (wasip1).
//
//go:embed go.mod go.sum ABI.md *.go abi/*.go wasmhost/*.go wasmbuild/*.go plugintest/*.go jsonscan/*.go internal/*/*.go
var Source embed.FS

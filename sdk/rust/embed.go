// Package rustsdk holds the sources of the Rust guest SDK crate (this
// folder: Cargo.toml, README.md, src/), so that the gateway binary can
// vendor the crate into the Rust plugins `tollgate plugin new` writes.
package rustsdk

import "embed"

// Files are the crate's Cargo.toml, README.md and src/*.rs, at their paths
// in the crate.
//
//go:embed Cargo.toml README.md src
var Files embed.FS

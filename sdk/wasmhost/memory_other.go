//go:build !linux

package wasmhost

import "context"

// withLinearMemory keeps wazero's default linear memory (a Go slice grown
// by reallocation) where the reservation of memory_linux.go is not built.
func withLinearMemory(ctx context.Context) context.Context { return ctx }

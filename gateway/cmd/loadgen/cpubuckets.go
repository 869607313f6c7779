package main

import (
	"fmt"
	"io"
	"os"

	"github.com/tollgate/tollgate/gateway/internal/testkit/loadgen"
)

const cpuBucketsUsage = `usage: loadgen cpubuckets [TRACES.txt]

Reads the output of "go tool pprof -traces PROFILE" (stdin without a file)
and prints, one a line, "BUCKET PER-MILLE" for each bucket of a gateway's
CPU (guest wasm, plugin host, host services, Redis client, Postgres client,
fasthttp + proxy, JSON/SSE, copies, syscalls, scheduler + GC, other), then
"sys_OWNER PER-MILLE" for the syscalls by who made them, then
"plugin:NAME:BUCKET PER-MILLE" for the samples taken inside plugin NAME's
callbacks (labelled plugin=NAME: tollgate serve -pprof), then "samples N"
(10 ms each). scripts/cpubreak.sh reads these lines.
`

func cpuBuckets(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 1 || len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stderr, cpuBucketsUsage)
		if len(args) == 1 {
			return 0
		}
		return 2
	}
	in := stdin
	if len(args) == 1 {
		f, err := os.Open(args[0])
		if err != nil {
			fmt.Fprintf(stderr, "loadgen cpubuckets: %v\n", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	split, err := loadgen.SplitCPU(in)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen cpubuckets: %v\n", err)
		return 1
	}
	if err := split.WritePermille(stdout); err != nil {
		fmt.Fprintf(stderr, "loadgen cpubuckets: %v\n", err)
		return 1
	}
	return 0
}

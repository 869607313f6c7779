package calllog

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkCommitCPU measures what one batch costs Postgres: the CPU time
// (utime + stime of /proc/PID/stat) of the one backend that commits
// batches of a given size, per row, plus the transactions per row. The
// rows carry request ids as the gateway makes them (a per-process prefix
// and a counter) for two tenants. insert=new is how the Writer commits
// (insertNewSQL), insert=idempotent how it commits a batch holding a row
// that is stored already (insertSQL).
//
//	go test -run '^$' -bench BenchmarkCommitCPU -benchtime 20000x ./gateway/internal/calllog/
func BenchmarkCommitCPU(b *testing.B) {
	inserts := []struct{ name, sql string }{{"new", insertNewSQL}, {"idempotent", insertSQL}}
	for _, size := range []int{1, 16, 64, 256, 1000} {
		for _, ins := range inserts {
			b.Run(fmt.Sprintf("rows=%d/insert=%s", size, ins.name), func(b *testing.B) {
				benchmarkCommitCPU(b, size, ins.sql)
			})
		}
	}
}

func benchmarkCommitCPU(b *testing.B, size int, insert string) {
	pool := newDB(b)
	one, err := pgxpool.New(b.Context(), pool.Config().ConnString()+"&pool_max_conns=1")
	if err != nil {
		b.Fatal(err)
	}
	defer one.Close()
	var pid int
	if err := one.QueryRow(b.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	rows := make([]Row, 0, size)
	prefix := fmt.Sprintf("req_%012x_", time.Now().UnixNano()&0xffffffffffff)
	cpu0, err := backendCPU(pid)
	if err != nil {
		b.Skipf("cannot read the backend's CPU time: %v", err)
	}
	b.ResetTimer()
	txs := 0
	for i := 0; i < b.N; i++ {
		rows = append(rows, row(prefix+strconv.FormatInt(int64(i), 36), tenants[i%2], 100))
		if len(rows) == size || i == b.N-1 {
			if _, err := commitBatch(context.Background(), one, rows, insert); err != nil {
				b.Fatal(err)
			}
			txs++
			rows = rows[:0]
		}
	}
	b.StopTimer()
	cpu1, err := backendCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "pg-µs/row")
	b.ReportMetric(float64(txs)/float64(b.N), "tx/row")
}

// backendCPU returns the utime + stime of process pid in µs.
func backendCPU(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the backend's stat: %w", err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat line %q", s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing the backend's stat %q", s)
	}
	return (ut + st) * 1e6 / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux the gateway runs on.
const clockTicks = 100

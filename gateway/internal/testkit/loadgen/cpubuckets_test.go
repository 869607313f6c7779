package loadgen

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestBucketOf(t *testing.T) {
	const tg = "github.com/tollgate/tollgate/"
	tests := []struct {
		name          string
		stack         []string // leaf first
		bucket, owner string
	}{
		{"guest code", []string{"runtime._ExternalCode", "runtime._System"}, "guest", ""},
		{"socket write by the proxy", []string{"internal/runtime/syscall/linux.Syscall6", "syscall.RawSyscall6", tg + "gateway/internal/sockio.(*op).write", "bufio.(*Writer).Flush", tg + "gateway/internal/upstream.(*Exchange).writeRequest"}, "syscall", "fasthttp"},
		{"Redis client write", []string{"internal/runtime/syscall/linux.Syscall6", "syscall.Syscall", "internal/poll.(*FD).Write", "net.(*conn).Write", "bufio.(*Writer).Flush", "github.com/redis/rueidis.(*pipe)._backgroundWrite"}, "syscall", "rueidis"},
		{"netpoll from the scheduler", []string{"internal/runtime/syscall/linux.EpollWait", "runtime.netpoll", "runtime.findRunnable", "runtime.schedule"}, "syscall", "other"},
		{"copy in fasthttp", []string{"runtime.memmove", "github.com/valyala/fasthttp.appendBodyFixedSize"}, "memmove", ""},
		{"allocation under the limiter", []string{"runtime.nextFreeFast", "runtime.mallocgc", tg + "gateway/internal/limiter.(*Memory).Admit"}, "sched_gc", ""},
		{"scheduler", []string{"runtime.(*listHeadManual).push", "runtime.mput", "runtime.stopm", "runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"}, "sched_gc", ""},
		{"host service under the plugin host", []string{tg + "gateway/internal/hostsvc.(*RateLimits).Serve", tg + "gateway/internal/hostsvc.(*Session).Call", tg + "sdk/wasmhost.(*Plugin).baseFuncs.func21", "github.com/tetratelabs/wazero/api.GoModuleFunc.Call"}, "hostsvc", ""},
		{"wazero's call engine", []string{"github.com/tetratelabs/wazero/internal/engine/wazevo.(*callEngine).callWithStack", tg + "sdk/wasmhost.(*instance).call", tg + "gateway/internal/proxy.(*exchange).runRequest"}, "wasmhost", ""},
		{"standard library for the budget", []string{"strings.(*Builder).WriteByte", tg + "gateway/internal/budget.(*Redis).keys", tg + "gateway/internal/hostsvc.(*Budget).settle"}, "hostsvc", ""},
		{"redisx counts as the Redis client", []string{"context.WithDeadlineCause", tg + "gateway/internal/redisx.(*Client).Exec", tg + "gateway/internal/budget.(*Redis).exec"}, "rueidis", ""},
		{"fastjson under the proxy", []string{"github.com/valyala/fastjson.(*Parser).ParseBytes", tg + "gateway/internal/proxy/stream.ReplyText", tg + "gateway/internal/proxy.(*exchange).parseReply"}, "json", ""},
		{"encoding/json", []string{"encoding/json.(*decodeState).object", "encoding/json.Unmarshal", tg + "gateway/internal/calllog.(*Writer).add"}, "json", ""},
		{"pgx", []string{"github.com/jackc/pgx/v5/pgproto3.(*Frontend).Receive", tg + "gateway/internal/calllog.(*Writer).flush"}, "pgx", ""},
		{"metrics are other", []string{"github.com/prometheus/client_golang/prometheus.(*histogram).Observe", tg + "gateway/internal/proxy/observe.(*Metrics).observe"}, "other", ""},
		{"runtime only", []string{"runtime.lock2", "runtime.lock", "time.newTimer"}, "other", ""},
		{"empty", nil, "other", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, o := BucketOf(tt.stack)
			if b != tt.bucket || o != tt.owner {
				t.Errorf("BucketOf = %q, %q; want %q, %q", b, o, tt.bucket, tt.owner)
			}
		})
	}
}

// traces is `go tool pprof -traces` output in miniature: a header, then
// samples separated by dashed lines, inlined frames marked.
const traces = `File: tollgate
Type: cpu
Duration: 2s, Total samples = 60ms ( 3.00%)
-----------+-------------------------------------------------------
      20ms   runtime._ExternalCode
             runtime._System
-----------+-------------------------------------------------------
      10ms   internal/runtime/syscall/linux.Syscall6
             syscall.RawSyscall6
             github.com/tollgate/tollgate/gateway/internal/sockio.(*op).write
-----------+-------------------------------------------------------
      10ms   internal/runtime/maps.h2 (inline)
             runtime.mapdelete
             github.com/tollgate/tollgate/gateway/internal/upstream.(*Exchange).Release
-----------+-------------------------------------------------------
   20000us   runtime.memmove
             github.com/valyala/fasthttp.appendBodyFixedSize
-----------+-------------------------------------------------------
`

func TestSplitCPU(t *testing.T) {
	s, err := SplitCPU(strings.NewReader(traces))
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := map[string]time.Duration{"guest": 20 * ms, "syscall": 10 * ms, "fasthttp": 10 * ms, "memmove": 20 * ms}
	if s.Total != 60*ms {
		t.Errorf("total %v, want 60ms", s.Total)
	}
	for _, b := range Buckets {
		if s.By[b] != want[b] {
			t.Errorf("%s: %v, want %v", b, s.By[b], want[b])
		}
	}
	if s.Syscalls["fasthttp"] != 10*ms || len(s.Syscalls) != 1 {
		t.Errorf("syscalls by owner %v, want fasthttp 10ms only", s.Syscalls)
	}
	var out bytes.Buffer
	if err := s.WritePermille(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"guest 333\n", "fasthttp 167\n", "syscall 167\n", "memmove 333\n", "other 0\n", "sys_fasthttp 167\n", "samples 6\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

func TestSplitCPURejectsABadSample(t *testing.T) {
	_, err := SplitCPU(strings.NewReader("-----------+---\n      tenms   runtime.memmove\n"))
	if err == nil {
		t.Fatal("a sample value that is no duration was accepted")
	}
}

func FuzzSplitCPU(f *testing.F) {
	f.Add(traces)
	f.Add("-----------+---\n 1s a\n b (inline)\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := SplitCPU(strings.NewReader(in))
		if err != nil {
			return
		}
		var sum time.Duration
		for _, d := range s.By {
			sum += d
		}
		if sum != s.Total {
			t.Errorf("buckets sum to %v, total %v", sum, s.Total)
		}
	})
}

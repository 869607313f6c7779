package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTenThousandOpenStreams holds 10,000 streams open at once through a
// gateway process whose pipeline has a chunk-phase plugin, and reports the
// gateway's peak RSS. Open streams are not limited by the plugin's instance
// pool (4 instances here), and memory stays bounded per stream.
//
// Each stream takes two descriptors in the gateway (client and upstream).
// Where the hard open-file limit is below 20,100 and cannot be raised (an
// unprivileged container), the test runs as many streams as the limit
// allows and says so.
//
// The mock holds every stream 10 s before its first token, so all of them
// are open at once however slowly the connections are made; then each
// sends its events through the chunk phase.
//
// Every process is a real binary (mock model, gateway, load generator), so
// this test's own process stays small.
func TestTenThousandOpenStreams(t *testing.T) {
	streams := 10000
	if limit := raiseFileLimit(t, 2*uint64(streams)+100); limit < 2*uint64(streams)+100 {
		streams = int(limit-100) / 2
		t.Logf("the hard open-file limit is %d and cannot be raised here: running %d streams (2 descriptors each in the gateway)", limit, streams)
	}
	for _, cmd := range []string{"mockllm", "loadgen"} {
		build := exec.Command("go", "build", "-o", binDir+"/", "../cmd/"+cmd)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", cmd, err, out)
		}
	}
	mockAddr := freeAddr(t)
	mock := exec.Command(filepath.Join(binDir, "mockllm"), "-listen", mockAddr, "-ttft", "10s", "-tokens", "3", "-inter-token", "500ms")
	if err := mock.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Process.Kill(); mock.Wait() })

	pol := withPlugins(t, policy("http://"+mockAddr, ""), "fail_closed", `{"chunk":"continue","phases":["chunk"]}`)
	pol = strings.Replace(pol, "limits: {deadline: 200ms}", "limits: {deadline: 200ms, instances: 4}", 1)
	pol = strings.Replace(pol, "timeouts: {connect: 1s, first_byte: 5s, idle: 5s, total: 30s}",
		"max_connections: 20000\n    timeouts: {connect: 10s, first_byte: 30s, idle: 30s, total: 2m}", 1)
	gw, url, logs := gatewayProcess(t, pol)

	// Sample the gateway's open descriptors (two per stream: client and
	// upstream) while the load runs.
	peakFDs := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		peak := 0
		for {
			select {
			case <-stop:
				peakFDs <- peak
				return
			case <-time.After(100 * time.Millisecond):
			}
			if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", gw.Process.Pid)); err == nil && len(ents) > peak {
				peak = len(ents)
			}
		}
	}()
	lg := exec.Command(filepath.Join(binDir, "loadgen"), "-url", url+"/v1/chat/completions", "-stream",
		"-c", fmt.Sprint(streams), "-n", fmt.Sprint(streams), "-warmup", "0", "-ramp", "3s", "-timeout", "90s", "-json")
	out, err := lg.Output()
	close(stop)
	peak := <-peakFDs
	if err != nil {
		t.Fatalf("loadgen: %v\n%s\ngateway logs:\n%s", err, out, tail(logs.String(), 2000))
	}
	var res struct {
		Count, Successes, Failures int
		Errors                     []struct {
			Message string
			Count   int
		}
		Total struct{ P50, P99 float64 } `json:"total_us"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("loadgen output %q: %v", out, err)
	}
	rss, hwm := procStatus(t, gw.Process.Pid, "VmRSS"), procStatus(t, gw.Process.Pid, "VmHWM")
	t.Logf("%d streams: %d ok, %d failed %v; gateway peak open fds %d; gateway RSS now %d MiB, peak %d MiB (%.1f KiB per stream)",
		streams, res.Successes, res.Failures, res.Errors, peak, rss>>10, hwm>>10, float64(hwm)/float64(streams))
	if res.Successes != streams || res.Failures != 0 {
		t.Errorf("%d of %d streams completed (%d failed: %v)\ngateway log tail:\n%s", res.Successes, streams, res.Failures, res.Errors, tail(logs.String(), 1500))
	}
	// Two descriptors per open stream; at least 99% of the streams must
	// have been open at the same moment (the sampling is every 100 ms).
	if open := peak / 2; open < streams*99/100 {
		t.Errorf("peak open descriptors %d: only about %d of the %d streams were open at once", peak, open, streams)
	}
	// Bounded memory: well under 100 KiB per open stream, all in.
	if hwm > 100*int64(streams) {
		t.Errorf("gateway peak RSS %d MiB for %d streams", hwm>>10, streams)
	}
}

// raiseFileLimit raises this process's open-file limit (inherited by the
// processes it starts) to n if it can, else to the hard limit, and returns
// the limit in force.
func raiseFileLimit(t *testing.T, n uint64) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return lim.Cur
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: max(n, lim.Max)}); err == nil {
		return n
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	return lim.Cur
}

func freeAddr(t *testing.T) string {
	u := closedPort(t)
	return strings.TrimPrefix(u, "http://")
}

// procStatus returns a /proc/PID/status field in KiB.
func procStatus(t *testing.T, pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			var n int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

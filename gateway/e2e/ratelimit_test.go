package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// pluginPath builds a plugin of plugins/ once per source change.
func pluginPath(t *testing.T, name string) string {
	t.Helper()
	p, err := wasmbuild.Cached(repoRoot(t) + "/plugins/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// limitedPolicy is a memory-store policy with one tenant whose plan allows
// rpm requests and tpm tokens a minute, preflight and ratelimit, and
// Redis at redisAddr ("" for none).
func limitedPolicy(t *testing.T, mockURL, redisAddr string, rpm, tpm int, rlConfig string) string {
	redis := ""
	if redisAddr != "" {
		// A generous timeout: these tests assert exact counts under fail_closed,
		// and a starved 2-core machine can stall a round trip.
		redis = fmt.Sprintf("redis: {addrs: [%q], timeout: 1s}\n", redisAddr)
	}
	return policy(mockURL, "", "mock-1", "mock-*") + redis + fmt.Sprintf(`
store:
  kind: memory
tenants:
  plans:
    - {id: metered, rpm: %d, tpm: %d}
    - {id: free}
  tenants:
    - id: warmup
      plan: free
      keys:
        - {id: w-1, key_sha256: %s}
    - id: acme
      plan: metered
      keys:
        - {id: k-1, key_sha256: %s}
        - {id: k-slow, key_sha256: %s, rpm: 2}
plugins:
  - name: preflight
    path: %s
  - name: ratelimit
    path: %s
    config: %s
`, rpm, tpm, sha("tg_rl_warm"), sha("tg_rl_1"), sha("tg_rl_slow"), pluginPath(t, "preflight"), pluginPath(t, "ratelimit"), rlConfig)
}

// commandCount returns how many times Redis ran cmd (lower case, e.g.
// "evalsha") since the last CONFIG RESETSTAT.
func commandCount(t *testing.T, srv *redistest.Server, cmd string) int {
	t.Helper()
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// scriptCalls counts the script and function calls srv served since its
// statistics were reset, less the fleet's heartbeats (one function call a
// second from each gateway, off the request path; each runs
// ZREMRANGEBYSCORE once, and nothing else does).
func scriptCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	return commandCount(t, srv, "evalsha") + commandCount(t, srv, "eval") + commandCount(t, srv, "fcall") - commandCount(t, srv, "zremrangebyscore")
}

// TestRateLimitExactAcrossReplicas: two gateway processes share one Redis;
// 500 requests from 64 concurrent clients against a 100 RPM plan admit
// exactly 100, and every refusal is an OpenAI-style 429.
func TestRateLimitExactAcrossReplicas(t *testing.T) {
	rds := redistest.Start(t)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	pol := limitedPolicy(t, mockURL, rds.Addr(), 100, 0, `{on_redis_error: fail_closed}`)
	_, gwA, logsA := gatewayProcess(t, pol)
	_, gwB, logsB := gatewayProcess(t, pol)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// Warm up: connections, plugin instances and Redis connections, with
	// another tenant's key.
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for _, gw := range []string{gwA, gwB} {
				req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(chatOnce))
				req.Header.Set("Authorization", "Bearer tg_rl_warm")
				if resp, err := client.Do(req); err == nil {
					var b [4096]byte
					readFull(resp.Body, b[:])
					resp.Body.Close()
				}
			}
		}(w)
	}
	wg.Wait()

	var ok, limited, other atomic.Int64
	var first, last atomic.Int64
	jobs := make(chan int)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				gw := gwA
				if i%2 == 1 {
					gw = gwB
				}
				req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(chatOnce))
				req.Header.Set("Authorization", "Bearer tg_rl_1")
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					other.Add(1)
					continue
				}
				var body [4096]byte
				n, _ := readFull(resp.Body, body[:])
				resp.Body.Close()
				now := time.Now().UnixNano()
				first.CompareAndSwap(0, now)
				last.Store(now)
				switch {
				case resp.StatusCode == 200:
					ok.Add(1)
				case resp.StatusCode == 429:
					e := decodeError(t, body[:n]).Error
					if e.Code == nil || *e.Code != "rate_limit_exceeded" || e.Type != "requests" || resp.Header.Get("Retry-After") == "" ||
						resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" {
						t.Errorf("429 not OpenAI-shaped: %+v headers %v", e, resp.Header)
					}
					limited.Add(1)
				default:
					t.Errorf("status %d: %s", resp.StatusCode, body[:n])
					other.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	for i := 0; i < 500; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	// GCRA at 100 RPM lets one more request in every 600 ms after the
	// burst of 100; the run normally ends well within that.
	extra := int64(elapsed / (600 * time.Millisecond))
	t.Logf("500 requests in %v: %d admitted, %d limited, %d other", elapsed, ok.Load(), limited.Load(), other.Load())
	if ok.Load() < 100 || ok.Load() > 100+extra || other.Load() != 0 || ok.Load()+limited.Load() != 500 {
		t.Fatalf("admitted %d (want exactly 100, +%d for the run's %v), limited %d, other %d\nA:\n%s\nB:\n%s",
			ok.Load(), extra, elapsed, limited.Load(), other.Load(), tail(logsA.String(), 2000), tail(logsB.String(), 2000))
	}
}

func TestRateLimitHeadersAndKeyLimit(t *testing.T) {
	rds := redistest.Start(t)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 2})
	_, gw := startGateway(t, limitedPolicy(t, mockURL, rds.Addr(), 50, 100000, `{}`), nil)

	status, h, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	for k, want := range map[string]string{
		"X-Ratelimit-Limit-Requests": "50", "X-Ratelimit-Remaining-Requests": "49",
		"X-Ratelimit-Limit-Tokens": "100000",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if r := h.Get("X-Ratelimit-Reset-Requests"); r == "" || !strings.HasSuffix(r, "s") {
		t.Errorf("X-Ratelimit-Reset-Requests = %q", r)
	}
	if rem, _ := strconv.Atoi(h.Get("X-Ratelimit-Remaining-Tokens")); rem <= 0 || rem >= 100000 {
		t.Errorf("X-Ratelimit-Remaining-Tokens = %q", h.Get("X-Ratelimit-Remaining-Tokens"))
	}
	// The key with its own 2 RPM: the third request is refused although
	// the tenant has room; the header reports the tighter limit.
	for i := 0; i < 2; i++ {
		if status, _, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_slow"); status != 200 {
			t.Fatalf("slow key request %d: %d %s", i, status, body)
		}
	}
	status, h, body = post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_slow")
	if status != 429 || h.Get("X-Ratelimit-Limit-Requests") != "2" {
		t.Fatalf("third request on a 2 RPM key: %d %v %s", status, h, body)
	}
	if ra, _ := strconv.Atoi(h.Get("Retry-After")); ra < 1 || ra > 60 {
		t.Errorf("Retry-After = %q", h.Get("Retry-After"))
	}
	// The tenant-wide count includes the slow key's two admitted requests.
	_, h, _ = post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1")
	if got := h.Get("X-Ratelimit-Remaining-Requests"); got != "46" {
		t.Errorf("tenant remaining after 4 admitted = %q, want 46", got)
	}
}

// TestRateLimitTokenCorrection: admission charges the estimate (prompt +
// default_max_tokens); the end gives back what the reply did not use.
func TestRateLimitTokenCorrection(t *testing.T) {
	rds := redistest.Start(t)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	// 1000 TPM; each request is estimated at ~1 + 600 tokens but uses ~5.
	_, gw := startGateway(t, limitedPolicy(t, mockURL, rds.Addr(), 0, 1000, `{default_max_tokens: 600}`), nil)
	for i := 0; i < 5; i++ {
		status, h, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1")
		if status != 200 {
			t.Fatalf("request %d: %d %s (without the correction the second request would be refused)", i, status, body)
		}
		rem, _ := strconv.Atoi(h.Get("X-Ratelimit-Remaining-Tokens"))
		// Before the correction of this request: 1000 − i×(used) − estimate.
		if rem > 1000-600 || rem < 1000-600-(i+1)*20 {
			t.Errorf("request %d: remaining tokens %d", i, rem)
		}
	}
	// A request whose estimate alone passes the limit is refused outright.
	status, h, body := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","max_tokens":5000,"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer tg_rl_1")
	if status != 429 || !strings.Contains(string(body), `"type":"tokens"`) || h.Get("Retry-After") == "" {
		t.Fatalf("over-limit estimate: %d %s", status, body)
	}
}

// TestRateLimitRedisFailure kills Redis under load: fail_closed answers
// 503, fail_open keeps serving on the local fallback; both recover by
// themselves once Redis is back, and the gateway never crashes.
func TestRateLimitRedisFailure(t *testing.T) {
	rds := redistest.Start(t)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	// The cancel poller shares the Redis and its scripts; a long interval
	// keeps its calls out of the counts below.
	quiet := func(pol string) string {
		return strings.Replace(pol, "drain_timeout: 2s", "drain_timeout: 2s\n  cancel_poll_interval: 1m", 1)
	}
	_, closedGW := startGateway(t, quiet(limitedPolicy(t, mockURL, rds.Addr(), 1000, 0, `{on_redis_error: fail_closed}`)), nil)
	_, openGW, _ := gatewayProcess(t, quiet(limitedPolicy(t, mockURL, rds.Addr(), 1000, 0, `{on_redis_error: fail_open, replicas: 2}`)))

	send := func(gw string) (int, []byte) {
		status, _, body := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1")
		return status, body
	}
	for _, gw := range []string{closedGW, openGW} {
		if s, b := send(gw); s != 200 {
			t.Fatalf("before the fault: %d %s", s, b)
		}
	}
	// SCRIPT FLUSH: the next call gets NOSCRIPT and reloads the script.
	if _, err := rds.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if _, err := rds.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	if s, b := send(closedGW); s != 200 {
		t.Fatalf("after SCRIPT FLUSH: %d %s", s, b)
	}
	if n := commandCount(t, rds, "eval"); n != 1 {
		t.Errorf("after SCRIPT FLUSH: %d EVAL, want 1 (the reload)", n)
	}

	// Load on both gateways for the whole fault: Redis dies and comes back
	// under it.
	stop := make(chan struct{})
	var loadWG sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for w := 0; w < 4; w++ {
		loadWG.Add(1)
		go func(w int) {
			defer loadWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				gw, name := closedGW, "closed"
				if w%2 == 1 {
					gw, name = openGW, "open"
				}
				req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(chatOnce))
				req.Header.Set("Authorization", "Bearer tg_rl_1")
				resp, err := http.DefaultClient.Do(req)
				key := name + ":error"
				if err == nil {
					resp.Body.Close()
					key = name + ":" + strconv.Itoa(resp.StatusCode)
				}
				mu.Lock()
				seen[key]++
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(100 * time.Millisecond)
	if err := rds.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		start := time.Now()
		s, b := send(closedGW)
		if s != 503 || !strings.Contains(string(b), "rate_limiter_unavailable") {
			t.Fatalf("fail_closed with Redis down: %d %s", s, b)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("fail_closed answer took %v", d)
		}
		if s, b := send(openGW); s != 200 {
			t.Fatalf("fail_open with Redis down: %d %s", s, b)
		}
	}
	if err := rds.Start(); err != nil {
		t.Fatal(err)
	}
	// Recovery without a restart: Redis answers again within seconds.
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, _ := send(closedGW)
		if s == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fail_closed gateway did not recover: last status %d", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	loadWG.Wait()
	t.Logf("statuses under load across the fault: %v", seen)
	for k := range seen {
		switch k {
		case "closed:200", "closed:503", "open:200":
		default:
			t.Errorf("unexpected outcome under the fault: %s ×%d", k, seen[k])
		}
	}
	if seen["closed:503"] == 0 || seen["open:200"] == 0 {
		t.Errorf("the fault was not seen under load: %v", seen)
	}
	if _, err := rds.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	if s, b := send(openGW); s != 200 {
		t.Fatalf("fail_open after recovery: %d %s", s, b)
	}
	if n := commandCount(t, rds, "evalsha") + commandCount(t, rds, "eval") + commandCount(t, rds, "fcall"); n < 1 {
		t.Errorf("the fail_open gateway did not go back to Redis after recovery")
	}
}

// TestRateLimitMemoryExact: without Redis, one process is exact.
func TestRateLimitMemoryExact(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	_, gw := startGateway(t, limitedPolicy(t, mockURL, "", 30, 0, `{}`), nil)
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(chatOnce))
				req.Header.Set("Authorization", "Bearer tg_rl_1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case 429:
					limited.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 30 || limited.Load() != 130 {
		t.Fatalf("admitted %d, limited %d; want 30 and 130", ok.Load(), limited.Load())
	}
}

package deploycheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// repo is the repository root (this module is tools/deploycheck).
var repo = func() string {
	abs, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return abs
}()

// built is the image's build output, made once: the build context copied as
// BuildKit would send it (Dockerfile.dockerignore applied) and
// deploy/docker/build.sh run in it, as the Dockerfile's build stage does.
var built struct {
	once     sync.Once
	ctx, out string
	files    int
	log      string
	err      error
}

func imageBuild(t *testing.T) (ctxDir, outDir string) {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "deploycheck-image")
		if err != nil {
			built.err = err
			return
		}
		built.ctx, built.out = filepath.Join(dir, "context"), filepath.Join(dir, "out")
		built.files, built.err = CopyContext(repo, filepath.Join(repo, "deploy/docker/Dockerfile.dockerignore"), built.ctx)
		if built.err != nil {
			return
		}
		built.log, built.err = RunBuild(built.ctx, built.out)
	})
	if built.err != nil {
		t.Fatalf("building the image's contents: %v", built.err)
	}
	return built.ctx, built.out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.ctx != "" {
		os.RemoveAll(filepath.Dir(built.ctx))
	}
	os.Exit(code)
}

// tollgateBin is the tollgate binary the image holds, built here.
func tollgateBin(t *testing.T) string {
	_, out := imageBuild(t)
	return filepath.Join(out, "bin", "tollgate")
}

// policyEnv is what every policy the deployment files ship needs to
// validate: the variables they read without a default.
func policyEnv(t *testing.T) []string {
	_, out := imageBuild(t)
	return []string{
		"TOLLGATE_DATABASE_URL=postgres://tollgate:secret@postgres:5432/tollgate",
		"TOLLGATE_ADMIN_TOKEN=admin-token",
		"TOLLGATE_METRICS_TOKEN=metrics-token",
		"OPENAI_API_KEY=sk-test",
		"TOLLGATE_PLUGIN_DIR=" + filepath.Join(out, "plugins"),
		// The chart's TLS files, made where the image build's output is
		// (the rendered policy names ${TOLLGATE_TLS_DIR:-/etc/tollgate/tls}/...).
		"TOLLGATE_TLS_DIR=" + tlsFixture(t, filepath.Join(out, "tls")),
	}
}

// TestImage checks the Dockerfile against what its build steps produce:
// the stages, a static binary for a libc-less image, one wasm module per
// plugins/*/ directory, every COPY source present, a numeric non-root user,
// and the image's default policy valid against the built plugins.
func TestImage(t *testing.T) {
	ctxDir, out := imageBuild(t)
	t.Logf("build context: %d files after Dockerfile.dockerignore\n%s", built.files, strings.TrimSpace(built.log))
	text, err := os.ReadFile(filepath.Join(repo, "deploy/docker/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages, err := ParseDockerfile(string(text))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range stages {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"build", "mockllm", "tollgate"}) {
		t.Fatalf("stages %v, want build, mockllm, tollgate (the last is the default target)", names)
	}
	if run := StageNamed(stages, "build").Last("RUN"); !strings.Contains(run, "deploy/docker/build.sh /out") {
		t.Errorf("the build stage's last RUN is %q, not deploy/docker/build.sh /out", run)
	}
	dirs := map[string]string{"/out/": out, "/src/": ctxDir}
	for _, tc := range []struct {
		stage, binary string
		files         []string
	}{
		{"tollgate", "/usr/local/bin/tollgate", []string{"/etc/tollgate/policy.yaml", "/etc/tollgate/plugins/",
			"/var/lib/tollgate/spool/", "/var/cache/tollgate/"}},
		{"mockllm", "/usr/local/bin/mockllm", nil},
	} {
		st := StageNamed(stages, tc.stage)
		files, err := ResolveCopies(st, "build", dirs)
		if err != nil {
			t.Errorf("%v", err)
		}
		if err := CheckStatic(files[tc.binary]); err != nil {
			t.Errorf("stage %s: %v", tc.stage, err)
		}
		for _, f := range tc.files {
			if files[f] == "" {
				t.Errorf("stage %s copies nothing to %s", tc.stage, f)
			}
		}
		if u := st.Last("USER"); u != "65532:65532" {
			t.Errorf("stage %s: USER %q, want the numeric non-root 65532:65532 (runAsNonRoot can verify a number)", tc.stage, u)
		}
		if ep := st.Last("ENTRYPOINT"); !strings.Contains(ep, tc.binary) {
			t.Errorf("stage %s: ENTRYPOINT %s does not run %s", tc.stage, ep, tc.binary)
		}
	}
	final := StageNamed(stages, "tollgate")
	if hc := final.Last("HEALTHCHECK"); hc != "NONE" {
		t.Errorf("HEALTHCHECK %q: the distroless image has nothing to run one with", hc)
	}
	if cmd := final.Last("CMD"); !strings.Contains(cmd, `"-policy", "/etc/tollgate/policy.yaml"`) {
		t.Errorf("CMD %s does not run the image's policy", cmd)
	}
	// The directories the policies write to are the ones the image makes
	// writable (the COPY --chown targets above).
	p, err := ParsePolicy(mustRead(t, filepath.Join(ctxDir, "deploy/docker/policy.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{ExpandDefaults(p.CallLog.SpoolDir), ExpandDefaults(p.PluginRuntime.CacheDir)} {
		writable := false
		for _, c := range final.Copies() {
			if c.Chown == "65532:65532" && strings.HasPrefix(dir+"/", c.Dst) {
				writable = true
			}
		}
		if !writable {
			t.Errorf("%s (policy.yaml) is not in a directory the image gives the runtime user", dir)
		}
	}

	// One module per plugin directory, each a c-shared wasip1 module.
	dirEntries, err := os.ReadDir(filepath.Join(repo, "plugins"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range dirEntries {
		if !e.IsDir() {
			continue
		}
		if err := CheckWasm(filepath.Join(out, "plugins", e.Name()+".wasm")); err != nil {
			t.Errorf("plugin %s: %v", e.Name(), err)
		}
	}

	// The image's policy, validated by the image's binary with its plugins.
	msg, err := ValidatePolicy(tollgateBin(t), mustRead(t, filepath.Join(ctxDir, "deploy/docker/policy.yaml")), policyEnv(t)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(msg))
	checkShippedCache(t, ctxDir, out)
}

// checkShippedCache: the compiled-plugin cache the image ships holds every
// plugin of its policy and of the embedded default, as the image's binary
// looks them up (`tollgate plugin warm` on a copy finds them all cached).
func checkShippedCache(t *testing.T, ctxDir, out string) {
	t.Helper()
	shipped, cache := filepath.Join(out, "state/cache/wazero"), filepath.Join(t.TempDir(), "wazero")
	err := filepath.WalkDir(shipped, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(shipped, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(cache, rel), 0o755)
		}
		return copyFile(p, filepath.Join(cache, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-policy", filepath.Join(ctxDir, "deploy/docker/policy.yaml")}, nil} {
		cmd := exec.Command(tollgateBin(t), append([]string{"plugin", "warm", "-cache-dir", cache}, args...)...)
		cmd.Env = append(os.Environ(), policyEnv(t)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("plugin warm %v: %v\n%s", args, err, b)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines[:len(lines)-1] {
			if !strings.Contains(l, ": already cached in ") {
				t.Errorf("the image's cache lacks a plugin of %v: %s", args, l)
			}
		}
		if len(lines) < 4 {
			t.Errorf("plugin warm %v warmed too little:\n%s", args, b)
		}
	}
}

// TestImageRejects: the Dockerfile checks catch a COPY of something the
// build does not produce and a stage that copies from elsewhere.
func TestImageRejects(t *testing.T) {
	ctxDir, out := imageBuild(t)
	text := mustRead(t, filepath.Join(repo, "deploy/docker/Dockerfile"))
	dirs := map[string]string{"/out/": out, "/src/": ctxDir}
	for _, tc := range []struct{ from, to, want string }{
		{"/out/plugins/ /etc", "/out/wasm/ /etc", "/out/wasm/"},
		{"COPY --from=build /src/deploy/docker/policy.yaml", "COPY deploy/docker/policy.yaml", "does not come from the build stage"},
	} {
		bad := strings.Replace(text, tc.from, tc.to, 1)
		if bad == text {
			t.Fatalf("%q not in the Dockerfile", tc.from)
		}
		stages, err := ParseDockerfile(bad)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ResolveCopies(StageNamed(stages, "tollgate"), "build", dirs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s → %s: want an error mentioning %q, got %v", tc.from, tc.to, tc.want, err)
		}
	}
	if err := CheckStatic(filepath.Join(out, "plugins", "preflight.wasm")); err == nil {
		t.Errorf("a wasm module passed as a static ELF binary")
	}
}

// TestDockerPolicy validates deploy/docker/policy.yaml with `tollgate
// validate`, and shows the validation can fail.
func TestDockerPolicy(t *testing.T) {
	text := mustRead(t, filepath.Join(repo, "deploy/docker/policy.yaml"))
	bin, env := tollgateBin(t), policyEnv(t)
	if _, err := ValidatePolicy(bin, text, env...); err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range p.Plugins {
		if !strings.HasPrefix(pl.Path, "${TOLLGATE_PLUGIN_DIR:-/etc/tollgate/plugins}/") {
			t.Errorf("plugin %s: path %s is not under the image's /etc/tollgate/plugins", pl.Name, pl.Path)
		}
	}
	if got := ExpandDefaults(p.Redis.Addrs[0]); got != "redis:6379" || !strings.Contains(p.Redis.Addrs[0], "${TOLLGATE_REDIS_ADDR") {
		t.Errorf("redis.addrs %v: want ${TOLLGATE_REDIS_ADDR} defaulting to the compose service", p.Redis.Addrs)
	}
	tests := []struct{ name, from, to, want string }{
		{"unknown key", "drain_timeout: 5m", "drain_timeot: 5m", "unknown field"},
		{"route to no upstream", "upstream: mock", "upstream: openai", "routes[0].upstream"},
		{"missing plugin", "/budget.wasm", "/no-such-plugin.wasm", "plugins[2].path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(text, tc.from, tc.to, 1)
			if bad == text {
				t.Fatalf("%q not found in the policy", tc.from)
			}
			msg, err := ValidatePolicy(bin, bad, env...)
			if err == nil || !strings.Contains(msg, tc.want) {
				t.Fatalf("tollgate validate accepted a broken policy or said something else (want %q): %v\n%s", tc.want, err, msg)
			}
		})
	}
	// Without the variables it reads, the policy is refused, naming them.
	_, out := imageBuild(t)
	msg, err := ValidatePolicy(bin, text, "TOLLGATE_PLUGIN_DIR="+filepath.Join(out, "plugins"))
	if err == nil || !strings.Contains(msg, "TOLLGATE_ADMIN_TOKEN") {
		t.Errorf("validated without TOLLGATE_ADMIN_TOKEN: %v\n%s", err, msg)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

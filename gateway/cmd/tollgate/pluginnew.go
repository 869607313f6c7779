package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/sdk/scaffold"
)

// pluginNew writes a new plugin folder: the example guard from
// sdk/scaffold, renamed, with a go.mod that builds offline (a Go plugin's
// SDK is replaced by a local copy), and a policy that loads it.
func pluginNew(args []string, stdout, stderr io.Writer) int {
	name, rest, ok := splitDirArg(args, "lang", "dir", "sdk")
	fs := flag.NewFlagSet("plugin new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lang := fs.String("lang", langGo, "the plugin's language: "+strings.Join(scaffold.Langs, " or "))
	dir := fs.String("dir", "", "the folder to write (default ./NAME); it must not exist or be empty")
	sdkDir := fs.String("sdk", "", "Go: the SDK module's folder (e.g. a checkout's sdk) for go.mod's replace (default: the SDK built into tollgate, unpacked into the user cache dir)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: tollgate plugin new NAME [-lang go|rust] [-dir DIR] [-sdk DIR]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if !ok || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if !slices.Contains(scaffold.Langs, *lang) {
		fmt.Fprintf(stderr, "tollgate plugin new: -lang %q: write -lang %s\n", *lang, strings.Join(scaffold.Langs, " or -lang "))
		return 2
	}
	if *dir == "" {
		*dir = name
	}
	if err := writePlugin(*dir, name, *lang, *sdkDir, stdout); err != nil {
		fmt.Fprintf(stderr, "tollgate plugin new: %v\n", err)
		return 1
	}
	printNextSteps(stdout, *dir, *lang)
	return 0
}

func writePlugin(dir, name, lang, sdkDir string, stdout io.Writer) error {
	var o scaffold.Options
	if lang == langGo {
		var err error
		if o.GoSDK, err = goSDKDir(sdkDir); err != nil {
			return err
		}
	}
	if err := scaffold.Write(dir, name, lang, o); err != nil {
		if errors.Is(err, scaffold.ErrNotEmpty) {
			return fmt.Errorf("%w\n(or write it elsewhere with -dir DIR)", err)
		}
		return err
	}
	if err := writePolicy(dir, name); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote the %s plugin %s into %s\n", lang, name, dir)
	if lang == langGo {
		return tidy(dir, stdout)
	}
	return nil
}

// goSDKDir is the SDK module folder a new Go plugin's go.mod replaces the
// SDK with: -sdk when given (checked), else the SDK built into tollgate.
func goSDKDir(flagDir string) (string, error) {
	if flagDir == "" {
		return unpackSDK()
	}
	abs, err := filepath.Abs(flagDir)
	if err != nil {
		return "", err
	}
	mod, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil || !bytes.Contains(mod, []byte("module github.com/tollgate/tollgate/sdk")) {
		return "", fmt.Errorf("-sdk %s: no go.mod of module github.com/tollgate/tollgate/sdk there: give a checkout's sdk folder, or leave -sdk out to use the SDK built into tollgate", flagDir)
	}
	return abs, nil
}

// tidy runs `go mod tidy` in a new Go plugin's folder, which resolves the
// SDK's own dependencies (from the module cache, else the module proxy).
func tidy(dir string, stdout io.Writer) error {
	goBin, err := exec.LookPath(goCommand())
	if err != nil {
		fmt.Fprintf(stdout, "go is not on PATH: skipped `go mod tidy`; install Go 1.25 or later (https://go.dev/dl/), then run `go mod tidy` in %s\n", dir)
		return nil
	}
	fmt.Fprintf(stdout, "running go mod tidy in %s\n", dir)
	cmd := exec.Command(goBin, "mod", "tidy")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go mod tidy in %s: %v\n%s\nit fetches the SDK's dependencies (wazero) from the Go module proxy: check the network or GOPROXY, then run `go mod tidy` in %s", dir, err, strings.TrimSpace(out.String()), dir)
	}
	return nil
}

// writePolicy writes DIR/policy.yaml: the plugin, built to DIR/NAME.wasm,
// in front of one OpenAI-compatible upstream, with the config of the
// plugin's test cases.
func writePolicy(dir, name string) error {
	config := "{}"
	if b, err := os.ReadFile(filepath.Join(dir, "plugin_test.json")); err == nil {
		var cases struct {
			Config json.RawMessage `json:"config"`
		}
		if json.Unmarshal(b, &cases) == nil && len(cases.Config) > 0 {
			var compact bytes.Buffer
			if json.Compact(&compact, cases.Config) == nil {
				config = compact.String()
			}
		}
	}
	wasm := filepath.Base(dir) + ".wasm"
	policy := fmt.Sprintf(policyTemplate, name, wasm, name, wasm, config)
	return os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o644)
}

const policyTemplate = `# A policy that runs the plugin %s (built by ` + "`tollgate plugin build .`" + ` into
# %s) in front of one OpenAI-compatible upstream:
#
#   TOLLGATE_UPSTREAM_URL=https://api.openai.com/v1 tollgate serve -policy policy.yaml
#
# For an upstream that needs a key, add api_key_env: OPENAI_API_KEY (the
# name of the environment variable that holds it) under the upstream.
# docs/POLICY.md describes every setting.
version: 1

server:
  listen: ${TOLLGATE_LISTEN:-127.0.0.1:8080}

upstreams:
  - name: upstream
    provider: openai
    base_url: ${TOLLGATE_UPSTREAM_URL:-http://127.0.0.1:9090/v1}

routes:
  - models: ["*"]
    upstream: upstream

plugins:
  - name: %s
    path: %s
    on_error: fail_closed
    config: %s
`

func printNextSteps(stdout io.Writer, dir, lang string) {
	fmt.Fprint(stdout, "\nnext:\n")
	fmt.Fprintf(stdout, "  cd %s\n", dir)
	fmt.Fprintf(stdout, "  tollgate plugin test .                   # build, then run %s\n", map[string]string{langGo: "the Go tests and plugin_test.json", langRust: "plugin_test.json"}[lang])
	fmt.Fprintf(stdout, "  tollgate plugin build .                  # -> %s.wasm\n", filepath.Base(dir))
	fmt.Fprintf(stdout, "  tollgate serve -policy policy.yaml       # the gateway with the plugin (set TOLLGATE_UPSTREAM_URL)\n")
}

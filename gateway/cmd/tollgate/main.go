// Command tollgate is the Tollgate LLM edge gateway.
//
//	tollgate serve [-policy FILE] [-listen ADDR]   run the gateway
//	tollgate validate FILE...                      check policy files
//	tollgate policy schema                         print the policy file's JSON Schema
//	tollgate plugin new NAME [-lang go|rust]       write a new plugin to start from
//	tollgate plugin build|test DIR                 build or test a plugin
//	tollgate plugin warm [-policy FILE]            compile a policy's plugins into the cache
//	tollgate plugin check FILE.wasm...             run the conformance suite against a module
//	tollgate version                               print the version
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with -pprof
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

const usage = `tollgate: an LLM edge gateway

Usage:
  tollgate serve [-policy FILE] [-listen ADDR]   run the gateway (embedded default policy without -policy)
  tollgate validate FILE...                      check policy files; lists every problem, exits 1 if any
  tollgate policy schema                         print the policy file's JSON Schema (for editors)
  tollgate plugin new NAME [-lang go|rust]       write a new plugin folder: a guard to start from, its tests, a policy
  tollgate plugin build DIR [-o FILE]            build a Go or Rust plugin into a .wasm module
  tollgate plugin test DIR [go test flags]       build it, run its Go tests and DIR/plugin_test.json against the module
  tollgate plugin warm [-policy FILE]            compile a policy's plugins into the compilation cache, then exit
  tollgate plugin check [-config JSON] FILE.wasm...   run the conformance suite against built modules (any language)
  tollgate migrate [up | status | down-to N]      apply the Postgres schema ($TOLLGATE_DATABASE_URL)
  tollgate keys create|revoke|list               manage API keys through the admin API
  tollgate admin-tokens create|list|revoke       manage the admin API's scoped tokens through it
  tollgate version                               print the version

Run 'tollgate COMMAND -h' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "policy":
		return policy(args[1:], stdout, stderr)
	case "plugin":
		return plugin(args[1:], stdout, stderr)
	case "migrate":
		return migrate(args[1:], stdout, stderr)
	case "keys":
		return keys(args[1:], stdout, stderr)
	case "admin-tokens":
		return adminTokens(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version())
		return 0
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "tollgate: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return "tollgate " + s.Value
			}
		}
		return "tollgate " + bi.Main.Version
	}
	return "tollgate (unknown version)"
}

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: tollgate validate FILE...") }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	code := 0
	for _, f := range fs.Args() {
		p, err := config.Load(f)
		if err != nil {
			code = 1
			var ps config.Problems
			if errors.As(err, &ps) {
				fmt.Fprintf(stderr, "%s: %d problem(s):\n", f, len(ps))
				for _, p := range ps {
					fmt.Fprintf(stderr, "  %s\n", p)
				}
				continue
			}
			fmt.Fprintf(stderr, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(stdout, "%s: ok\n", f)
		for _, w := range p.DrainWarnings() {
			fmt.Fprintf(stdout, "  warning: %s\n", w)
		}
	}
	return code
}

// serve runs the gateway. On the embedded default policy it prints the
// demo keys and curl lines to stdout once it listens.
func serve(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policyPath := fs.String("policy", "", "policy file (default: the embedded default policy)")
	listen := fs.String("listen", "", "listen address, overriding server.listen")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060); off by default")
	watch := fs.Duration("watch", 2*time.Second, "poll the policy file and its plugin modules this often and reload on change (0 disables; SIGHUP always reloads)")
	shutdownDelay := fs.Duration("shutdown-delay", 0, "after SIGTERM, how long readiness fails before the listener closes (give load balancers time to notice)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "tollgate: -log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)

	var (
		p    *config.Policy
		demo demoKeys
		err  error
	)
	source := *policyPath
	if source == "" {
		source = "(embedded default)"
		if demo, err = newDemoKeys(); err == nil {
			p, err = loadEmbedded(demo)
		}
	} else {
		p, err = config.Load(source)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate: policy %s:\n  %s\n", source, strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return 1
	}
	if *listen != "" {
		p.Server.Listen = *listen
	}
	ln, err := net.Listen("tcp", p.Server.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate: %v\n", err)
		return 1
	}
	if *pprofAddr != "" {
		// The plugins' callbacks labelled by plugin, so that a CPU profile
		// splits the guests' time (scripts/cpubreak.sh).
		wasmhost.SetProfileLabels(true)
		go func() {
			if err := http.ListenAndServe(*pprofAddr, nil); err != nil {
				log.Error("pprof listener", "err", err)
			}
		}()
	}
	pubTLS, err := listenerTLS(serverTLSFiles(p), log.With("listener", "public"))
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "tollgate: server.tls: %v\n", err)
		return 1
	}
	defer pubTLS.Close()
	srv, err := proxy.New(p, log)
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "tollgate: %v\n", err)
		return 1
	}
	errc := make(chan error, 1)
	go func() { errc <- serveClients(srv, ln, pubTLS) }()
	log.Info("tollgate serving", "listen", ln.Addr().String(), "tls", pubTLS != nil, "policy", source,
		"upstreams", len(p.Upstreams), "routes", len(p.Routes), "plugins", len(p.Plugins), "version", version())
	if demo != nil {
		printDemo(stdout, ln.Addr(), demo)
	}

	logDrainWarnings(p, log)
	_, stopMetrics, err := serveMetrics(p, srv, log)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate: %v\n", err)
		return 1
	}
	defer stopMetrics()
	if p.Admin.Listen != "" {
		adminLn, err := net.Listen("tcp", p.Admin.Listen)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate: admin listener: %v\n", err)
			return 1
		}
		adminTLS, err := listenerTLS(adminTLSFiles(p), log.With("listener", "admin"))
		if err != nil {
			adminLn.Close()
			fmt.Fprintf(stderr, "tollgate: admin.tls: %v\n", err)
			return 1
		}
		defer adminTLS.Close()
		adminLn = adminListener(adminLn, adminTLS)
		adminSrv := &http.Server{Handler: adminMux(p, srv), ReadHeaderTimeout: 10 * time.Second}
		go adminSrv.Serve(adminLn)
		defer adminSrv.Close()
		log.Info("admin API serving", "listen", adminLn.Addr().String(), "tls", adminTLS != nil)
	}
	stopReload := make(chan struct{})
	defer close(stopReload)
	go (&reloader{srv: srv, log: log, path: *policyPath, demo: demo, every: *watch}).run(stopReload)

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errc:
		log.Error("server stopped", "err", err)
		return 1
	case s := <-sig:
		log.Info("draining", "signal", s.String(), "drain_timeout", p.Server.DrainTimeout.String(), "in_flight", srv.InFlight())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(*shutdownDelay, p.Server.DrainTimeout) }()
	select {
	case err := <-done:
		if err != nil {
			log.Error("shutdown", "err", err)
			return 1
		}
	case s := <-sig:
		log.Warn("second signal: exiting without draining", "signal", s.String(), "in_flight", srv.InFlight())
		return 1
	}
	log.Info("stopped")
	return 0
}

package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
)

// reloader reloads the policy on SIGHUP and when the policy file or a
// plugin module it names changes on disk (polled: no inotify dependency,
// and it works on the ConfigMap symlink swaps Kubernetes does).
type reloader struct {
	srv    *proxy.Server
	log    *slog.Logger
	path   string   // "" for the embedded default: only SIGHUP, nothing to watch
	demo   demoKeys // the embedded default's keys, the same across reloads
	every  time.Duration
	stamps map[string]time.Time
}

func (r *reloader) run(done <-chan struct{}) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var tick <-chan time.Time
	if r.path != "" && r.every > 0 {
		t := time.NewTicker(r.every)
		defer t.Stop()
		tick = t.C
		r.stamps = r.current(nil)
	}
	for {
		select {
		case <-done:
			return
		case <-hup:
			r.reload("SIGHUP")
		case <-tick:
			now := r.current(nil)
			if changed(r.stamps, now) {
				r.stamps = now
				r.reload("file changed")
			}
		}
	}
}

// current stats the policy file and the plugin files of p (or of the policy
// on disk when p is nil).
func (r *reloader) current(p *config.Policy) map[string]time.Time {
	files := []string{r.path}
	if p == nil {
		if q, err := config.Load(r.path); err == nil {
			p = q
		}
	}
	if p != nil {
		for _, pl := range p.Plugins {
			files = append(files, pl.File)
		}
	}
	m := make(map[string]time.Time, len(files))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			m[f] = st.ModTime()
		}
	}
	return m
}

func changed(a, b map[string]time.Time) bool {
	if len(a) != len(b) {
		return true
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !w.Equal(v) {
			return true
		}
	}
	return false
}

func (r *reloader) reload(why string) {
	var (
		p   *config.Policy
		err error
	)
	if r.path == "" {
		p, err = loadEmbedded(r.demo)
	} else {
		p, err = config.Load(r.path)
	}
	if err == nil {
		err = r.srv.Reload(p)
	}
	if err != nil {
		r.log.Error("reload failed; the previous policy keeps serving", "trigger", why, "err", err)
		return
	}
	r.log.Info("policy reloaded", "trigger", why, "plugins", len(p.Plugins), "routes", len(p.Routes))
}

package deploycheck

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// LoadCompose loads a compose file as `docker compose config` does: the
// Compose specification's JSON schema, interpolation with env (NAME →
// value; nothing else of this process's environment), and the model's own
// consistency checks (depends_on naming a service that does not exist,
// dependency cycles, ...). content, if not nil, is used instead of the
// file's (relative paths still resolve from the file's directory).
func LoadCompose(file string, content []byte, env map[string]string) (*types.Project, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs, Content: content}},
		Environment: env,
	}
	return loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("tollgate", false)
	})
}

// ComposeExpect is what CheckCompose requires of the stack.
type ComposeExpect struct {
	// Gateway is the gateway service; it must depend on Migrate completing
	// and on every service of HealthyDeps being healthy.
	Gateway, Migrate string
	HealthyDeps      []string
	// PolicyTarget is where the gateway's command says the policy is; a
	// volume must mount PolicySource there.
	PolicyTarget, PolicySource string
	// Env must be set on the gateway.
	Env []string
}

// CheckCompose checks the loaded stack against want.
func CheckCompose(p *types.Project, want ComposeExpect) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	gw, err := p.GetService(want.Gateway)
	if err != nil {
		return err
	}
	need := map[string]string{want.Migrate: types.ServiceConditionCompletedSuccessfully}
	for _, s := range want.HealthyDeps {
		need[s] = types.ServiceConditionHealthy
	}
	for name, cond := range need {
		dep, ok := gw.DependsOn[name]
		if !ok || dep.Condition != cond {
			fail("%s: depends_on %s must have condition %s, got %+v", gw.Name, name, cond, dep)
		}
		if cond != types.ServiceConditionHealthy {
			continue
		}
		s, err := p.GetService(name)
		if err != nil {
			fail("%v", err)
			continue
		}
		if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) == 0 {
			fail("%s: no healthcheck, but %s waits for it to be healthy", name, gw.Name)
		}
	}
	mig, err := p.GetService(want.Migrate)
	if err != nil {
		fail("%v", err)
	} else {
		if !slices.Equal(mig.Command, types.ShellCommand{"migrate", "up"}) {
			fail("%s: command %q, want [migrate up]", mig.Name, mig.Command)
		}
		if mig.Restart != "" && mig.Restart != types.RestartPolicyNo {
			fail("%s: restart %q: a one-shot must not restart", mig.Name, mig.Restart)
		}
		if mig.Image != gw.Image {
			fail("%s: image %q is not the gateway's %q", mig.Name, mig.Image, gw.Image)
		}
	}
	if got := flagValue(gw.Command, "-policy"); got != want.PolicyTarget {
		fail("%s: -policy %q, want %q", gw.Name, got, want.PolicyTarget)
	}
	mounted := false
	for _, v := range gw.Volumes {
		if v.Target == want.PolicyTarget && filepath.Clean(v.Source) == filepath.Clean(want.PolicySource) {
			mounted = true
			if !v.ReadOnly {
				fail("%s: the policy is mounted read-write", gw.Name)
			}
		}
	}
	if !mounted {
		fail("%s: no volume mounts %s at %s", gw.Name, want.PolicySource, want.PolicyTarget)
	}
	for _, name := range want.Env {
		if v, ok := gw.Environment[name]; !ok || v == nil || *v == "" {
			fail("%s: environment %s is not set", gw.Name, name)
		}
	}
	if gw.StopGracePeriod == nil {
		fail("%s: no stop_grace_period: docker's default 10s would cut open streams", gw.Name)
	}
	for _, s := range p.Services {
		if s.Image == "" && s.Build == nil {
			fail("%s: neither image nor build", s.Name)
		}
		for _, port := range s.Ports {
			if port.Published != "" && port.HostIP != "127.0.0.1" {
				fail("%s: port %s is published on %q, not the host's loopback", s.Name, port.Published, port.HostIP)
			}
		}
		if s.Build != nil && !strings.HasSuffix(filepath.ToSlash(s.Build.Dockerfile), "deploy/docker/Dockerfile") {
			fail("%s: builds %s, not deploy/docker/Dockerfile", s.Name, s.Build.Dockerfile)
		}
	}
	return errors.Join(errs...)
}

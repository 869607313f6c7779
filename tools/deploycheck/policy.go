package deploycheck

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Policy is the part of a Tollgate policy (docs/POLICY.md) the deployment
// depends on. The gateway's own decoder (`tollgate validate`) checks the
// whole file; this reads what the manifests must agree with.
type Policy struct {
	Server struct {
		Listen       string     `yaml:"listen"`
		DrainTimeout string     `yaml:"drain_timeout"`
		TLS          *PolicyTLS `yaml:"tls"`
	} `yaml:"server"`
	Upstreams []struct {
		Name      string `yaml:"name"`
		APIKeyEnv string `yaml:"api_key_env"`
		Timeouts  struct {
			Total string `yaml:"total"`
		} `yaml:"timeouts"`
	} `yaml:"upstreams"`
	Metrics struct {
		Listen   string `yaml:"listen"`
		Public   bool   `yaml:"public"`
		TokenEnv string `yaml:"token_env"`
	} `yaml:"metrics"`
	Admin struct {
		Listen   string     `yaml:"listen"`
		TokenEnv string     `yaml:"token_env"`
		TLS      *PolicyTLS `yaml:"tls"`
	} `yaml:"admin"`
	Store struct {
		Kind     string `yaml:"kind"`
		Postgres struct {
			DSNEnv   string `yaml:"dsn_env"`
			MaxConns int    `yaml:"max_conns"`
		} `yaml:"postgres"`
	} `yaml:"store"`
	Redis struct {
		Addrs       []string   `yaml:"addrs"`
		PasswordEnv string     `yaml:"password_env"`
		Username    string     `yaml:"username"`
		TLS         *PolicyTLS `yaml:"tls"`
	} `yaml:"redis"`
	CallLog struct {
		SpoolDir string `yaml:"spool_dir"`
	} `yaml:"call_log"`
	PluginRuntime struct {
		CacheDir string `yaml:"cache_dir"`
	} `yaml:"plugin_runtime"`
	Plugins []struct {
		Name string `yaml:"name"`
		Path string `yaml:"path"`
	} `yaml:"plugins"`
}

// PolicyTLS is a TLS section of the policy (server.tls, admin.tls,
// redis.tls): the files it names.
type PolicyTLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	CAFile       string `yaml:"ca_file"`        // redis.tls
	ClientCAFile string `yaml:"client_ca_file"` // admin.tls
	ClientAuth   string `yaml:"client_auth"`    // admin.tls
	MinVersion   string `yaml:"min_version"`
	ServerName   string `yaml:"server_name"` // redis.tls
}

// Files returns the files the section names, by YAML key.
func (t *PolicyTLS) Files() map[string]string {
	files := map[string]string{}
	if t == nil {
		return files
	}
	for k, v := range map[string]string{"cert_file": t.CertFile, "key_file": t.KeyFile, "ca_file": t.CAFile, "client_ca_file": t.ClientCAFile} {
		if v != "" {
			files[k] = v
		}
	}
	return files
}

// ParsePolicy reads the fields of Policy from a policy file's text,
// ignoring the others.
func ParsePolicy(text string) (*Policy, error) {
	var p Policy
	if err := yaml.Unmarshal([]byte(text), &p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if p.Store.Postgres.DSNEnv == "" {
		p.Store.Postgres.DSNEnv = "TOLLGATE_DATABASE_URL"
	}
	if p.Admin.TokenEnv == "" {
		p.Admin.TokenEnv = "TOLLGATE_ADMIN_TOKEN"
	}
	if p.Redis.PasswordEnv == "" {
		p.Redis.PasswordEnv = "TOLLGATE_REDIS_PASSWORD"
	}
	return &p, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// ExpandDefaults replaces ${VAR:-default} with its default, as the gateway
// does when VAR is unset; a ${VAR} without a default is left as it is.
func ExpandDefaults(s string) string {
	return envRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := envRef.FindStringSubmatch(m)
		if sub[2] == "" {
			return m
		}
		return sub[3]
	})
}

// ListenPort returns the port of a policy listen address (after
// ExpandDefaults).
func ListenPort(addr string) (int, error) {
	_, port, err := net.SplitHostPort(ExpandDefaults(addr))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// ValidatePolicy runs `tollgate validate` on policy text with env (NAME=value)
// added to this process's environment and returns its output. The binary
// decodes the policy strictly and checks every value, as `tollgate serve`
// does at start.
func ValidatePolicy(tollgate, text string, env ...string) (string, error) {
	dir, err := os.MkdirTemp("", "deploycheck-policy")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	f := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		return "", err
	}
	cmd := exec.Command(tollgate, "validate", f)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	msg := strings.ReplaceAll(out.String(), f, "policy.yaml")
	if err != nil {
		return msg, fmt.Errorf("tollgate validate: %v\n%s", err, msg)
	}
	return msg, nil
}

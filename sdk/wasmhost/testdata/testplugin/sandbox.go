package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// sandboxProbe is the config of the sandbox action: what to try to reach.
type sandboxProbe struct {
	File  string `json:"file"`  // a host file to read
	Write string `json:"write"` // a host path to create
	Env   string `json:"env"`   // a host environment variable to read
	Addr  string `json:"addr"`  // a host TCP address to dial
}

// probeSandbox tries every way out of the sandbox it knows and reports
// what it got, one "name=result" per probe joined by ";". A probe that got
// nothing reports "-"; one that got something reports what. A sandboxed
// plugin reports
//
//	file=-;write=-;root=-;cwd=-;env=-;environ=0;args=0;dial=-;fds=0
func probeSandbox(p sandboxProbe) string {
	var out []string
	add := func(name, v string) { out = append(out, name+"="+v) }

	if b, err := os.ReadFile(p.File); err == nil {
		add("file", "read "+strconv.Itoa(len(b))+" bytes")
	} else {
		add("file", "-")
	}
	if f, err := os.Create(p.Write); err == nil {
		f.Close()
		add("write", "created")
	} else {
		add("write", "-")
	}
	for _, dir := range [...]struct{ name, path string }{{"root", "/"}, {"cwd", "."}} {
		if es, err := os.ReadDir(dir.path); err == nil {
			add(dir.name, strconv.Itoa(len(es))+" entries")
		} else {
			add(dir.name, "-")
		}
	}
	if v, ok := os.LookupEnv(p.Env); ok {
		add("env", "set ("+strconv.Itoa(len(v))+" bytes)")
	} else {
		add("env", "-")
	}
	add("environ", strconv.Itoa(len(os.Environ())))
	add("args", strconv.Itoa(len(os.Args)))
	if c, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
		c.Close()
		add("dial", "connected")
	} else {
		add("dial", "-")
	}
	// Descriptors past stdio would be preopened directories or sockets.
	fds := 0
	for fd := 3; fd < 32; fd++ {
		if _, err := os.NewFile(uintptr(fd), "").Stat(); err == nil {
			fds++
		}
	}
	add("fds", strconv.Itoa(fds))
	return strings.Join(out, ";")
}

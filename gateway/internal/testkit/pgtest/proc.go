package pgtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one run of postgres.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait returns
	err  error         // cmd.Wait's result, set before done is closed
}

// spawn starts cmd from a goroutine locked to its OS thread that then waits
// for it: Pdeathsig fires when the thread that started the child exits, not
// the process (golang/go#27505), and Go may retire an unlocked thread.
func spawn(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// kill SIGKILLs the postmaster and its children and waits until none is
// left. Backends call setsid, so they are not in the postmaster's process
// group: they are found as its children while it is stopped (SIGSTOP), so it
// can fork no more. A backend that outlived the postmaster would keep the
// shared memory attached, and the next start would refuse to run.
func (p *process) kill() error {
	// Process.Signal (a pidfd) cannot hit another process that reused the
	// pid of an exited postmaster.
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		<-p.done // already exited
		return nil
	}
	kids := children(p.cmd.Process.Pid)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	deadline := time.Now().Add(10 * time.Second)
	for _, k := range kids {
		for alive(k) {
			if time.Now().After(deadline) {
				return fmt.Errorf("postgres backend %d still running after SIGKILL", k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// children returns the pids whose parent is ppid.
func children(ppid int) []int {
	var kids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if st, ok := readStat(pid); ok && st.ppid == ppid {
			kids = append(kids, pid)
		}
	}
	return kids
}

// alive reports whether pid runs. Zombies do not count: they hold no shared
// memory, and whoever reaps them (PID 1 of a container) may never do it.
func alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.state != "Z" && st.state != "X"
}

type procStat struct {
	state string
	ppid  int
}

// readStat reads /proc/<pid>/stat; ok is false if the process is gone.
func readStat(pid int) (st procStat, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return st, false
	}
	// "pid (comm) state ppid ...": comm may hold anything, so split after
	// its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return st, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return st, false
	}
	st.state = f[0]
	st.ppid, _ = strconv.Atoi(f[1])
	return st, true
}

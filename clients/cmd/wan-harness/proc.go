package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

var lookPath = exec.LookPath

// Proc is a process the harness started inside one of its namespaces.
type Proc struct {
	Name   string
	NS     string
	Log    string
	Server bool // validator, data server: stopped after the clients

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs argv inside namespace ns (ip netns exec, which execs argv:
// the pid is argv's), output to logPath. The process has its own process
// group, so a Ctrl-C at the terminal reaches only the harness, which then
// stops its processes in order; and it is killed if the harness dies.
func (t *Topo) Start(ns, name, logPath string, server bool, argv ...string) (*Proc, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errors.New("the harness is shutting down")
	}
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = t.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, NS: ns, Log: logPath, Server: server, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	t.mu.Lock()
	t.procs = append(t.procs, p)
	t.mu.Unlock()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and its error.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	if ok, _ := p.Exited(); !ok {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Stop sends SIGINT (a client leaves the run), waits up to grace, then kills.
func (p *Proc) Stop(grace time.Duration) {
	if ok, _ := p.Exited(); ok {
		return
	}
	p.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.Kill()
}

// Kill ends the process at once (SIGKILL) and waits for it.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Wait waits for the process to exit, up to d.
func (p *Proc) Wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

package runmanager

import (
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// Command is a client process to start: Path with Args (not counting
// Path), Env added to this process's environment, and where its output
// goes.
type Command struct {
	Path           string
	Args, Env      []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// tailSize is how much of the client's stderr is kept for its messages.
const tailSize = 64 * 1024

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// process is a started Command.
type process struct {
	cmd  *exec.Cmd
	tail *tail
}

// Start starts c; its stderr is copied to c.Stderr and kept for Exit.Output.
// The client stays in this process's group, so a terminal's Ctrl-C reaches
// it as well (psyche-client train treats a second SIGINT like the first).
func Start(c Command) (Child, error) {
	t := &tail{}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdin, cmd.Stdout = c.Stdin, c.Stdout
	cmd.Stderr = t
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(c.Stderr, t)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &process{cmd: cmd, tail: t}, nil
}

func (p *process) Wait() Exit {
	err := p.cmd.Wait()
	st := p.cmd.ProcessState
	if st == nil {
		return Exit{Code: -1, Status: err.Error(), Output: p.tail.String()}
	}
	return Exit{Code: st.ExitCode(), Status: st.String(), Output: p.tail.String()}
}

func (p *process) Interrupt() error { return p.cmd.Process.Signal(syscall.SIGINT) }

func (p *process) Kill() error { return p.cmd.Process.Kill() }

// Shell runs script with sh -c, env added to this process's environment, its
// output to stdout and stderr, until it exits or ctx is done.
func Shell(ctx context.Context, script string, env []string, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd.Run()
}

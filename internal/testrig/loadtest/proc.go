package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles ./cmd/acds of the module at root into dir and returns the
// binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "acds")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/acds")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/acds: %v\n%s", err, out)
	}
	return bin, nil
}

// readyServe is the ready line of `acds serve`.
var readyServe = regexp.MustCompile(`^acds \d+\.\d+\.\d+ serving on (https?://127\.0\.0\.1:\d+) \(`)

// Proc is a running `acds` process started by Start.
type Proc struct {
	// URL is the base URL its ready line named (serve), or "" (portal).
	URL string
	// Stdout is everything it printed on stdout until it was ready.
	Stdout []string

	bin  string
	args []string
	cmd  *exec.Cmd
	errf *os.File

	mu      sync.Mutex
	peakRSS int64 // the highest VmHWM seen, in bytes, over every run
	exited  chan struct{}
}

// Start runs bin with args (e.g. "serve", "--addr", "127.0.0.1:0", …) and
// waits up to a minute for the line ready matches on its stdout, whose
// first group (if any) becomes URL. Its stderr goes to errPath.
func Start(ctx context.Context, bin, errPath string, ready *regexp.Regexp, args ...string) (*Proc, error) {
	p := &Proc{bin: bin, args: args}
	f, err := os.OpenFile(errPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p.errf = f
	if err := p.start(ctx, ready); err != nil {
		_ = f.Close()
		return nil, err
	}
	return p, nil
}

// StartServe is Start for `acds serve` with its ready line.
func StartServe(ctx context.Context, bin, errPath string, args ...string) (*Proc, error) {
	return Start(ctx, bin, errPath, readyServe, append([]string{"serve"}, args...)...)
}

func (p *Proc) start(ctx context.Context, ready *regexp.Regexp) error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stderr = p.errf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after ready: drop
			}
		}
		close(lines)
		_ = cmd.Wait()
		close(p.exited)
	}()
	go p.watchRSS(cmd.Process.Pid, p.exited)
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	p.Stdout = nil
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return fmt.Errorf("%s exited before its ready line (stderr in %s)", p.args[0], p.errf.Name())
			}
			p.Stdout = append(p.Stdout, l)
			if m := ready.FindStringSubmatch(l); m != nil {
				if len(m) > 1 {
					p.URL = m[1]
				}
				go func() { // keep draining stdout
					for range lines {
					}
				}()
				return nil
			}
		case <-timeout.C:
			_ = cmd.Process.Kill()
			return fmt.Errorf("%s printed no ready line in a minute", p.args[0])
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return ctx.Err()
		}
	}
}

// watchRSS samples the process's peak resident set (VmHWM) until it exits.
func (p *Proc) watchRSS(pid int, exited <-chan struct{}) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if v, err := vmHWM(pid); err == nil {
			p.mu.Lock()
			p.peakRSS = max(p.peakRSS, v)
			p.mu.Unlock()
		}
		select {
		case <-exited:
			return
		case <-t.C:
		}
	}
}

// vmHWM reads a process's peak resident set size from /proc, in bytes.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmHWM")
}

// PeakRSS is the highest resident set the process reached, over every
// run since Start, in bytes (0 where /proc is not available).
func (p *Proc) PeakRSS() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peakRSS
}

// Kill9 kills the process with SIGKILL and waits for it to exit.
func (p *Proc) Kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Restart starts the process again with the same arguments (after Kill9).
// The new one listens on a new port: URL changes.
func (p *Proc) Restart(ctx context.Context) error {
	return p.start(ctx, readyServe)
}

// Stop ends the process with SIGTERM (draining), or SIGKILL after 30 s.
func (p *Proc) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.Kill9()
	}
	_ = p.errf.Close()
}

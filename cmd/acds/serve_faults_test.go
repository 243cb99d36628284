package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/client"
)

// TestServeFaultHelperProcess is not a test: TestServeRefusesALostLog
// runs the test binary with ACDS_FAULT_HELPER=1 to get a real `acds
// serve` process (flags, errors and exit code as the command has them)
// that it can SIGKILL. With ACDS_FAULT_PIN=1 the child first holds a read
// transaction on the store, so that no checkpoint passes it and every
// commit stays in the write-ahead log. It serves until its stdin closes.
func TestServeFaultHelperProcess(t *testing.T) {
	if os.Getenv("ACDS_FAULT_HELPER") != "1" {
		t.Skip("helper process for TestServeRefusesALostLog")
	}
	args := strings.Split(os.Getenv("ACDS_SERVE_ARGS"), "\x1f")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	if os.Getenv("ACDS_FAULT_PIN") == "1" {
		go pinStore(filepath.Join(args[len(args)-1], "acds.db"))
	}
	os.Exit(runServe(ctx, env{args: args, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}

// pinStore waits for the store at db to be open (its mark exists), holds
// a read transaction on it for good and prints "pinned".
func pinStore(db string) {
	for {
		if _, err := os.Stat(db + "-mark"); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	rdb, err := sql.Open("sqlite", db)
	if err == nil {
		var tx *sql.Tx
		if tx, err = rdb.Begin(); err == nil {
			var n int
			err = tx.QueryRow("SELECT count(*) FROM requests").Scan(&n)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pin:", err)
		os.Exit(3)
	}
	fmt.Println("pinned")
}

// serveChild is a running (or exited) `acds serve` child.
type serveChild struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	base   string        // its URL once ready
	stderr *bytes.Buffer // what it printed there
	exit   error         // its exit, when it exited before it was ready
}

// startServeChild starts the helper with args; it returns once the child
// is ready (and pinned, with pin) or has exited.
func startServeChild(t *testing.T, pin bool, args ...string) *serveChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeFaultHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ACDS_FAULT_HELPER=1", "ACDS_SERVE_ARGS="+strings.Join(args, "\x1f"))
	if pin {
		cmd.Env = append(cmd.Env, "ACDS_FAULT_PIN=1")
	}
	c := &serveChild{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = &lockedWriter{w: c.stderr}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		base, pinned := "", !pin
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := readyRE.FindStringSubmatch(sc.Text()); m != nil {
				base = m[1]
			}
			pinned = pinned || sc.Text() == "pinned"
			if base != "" && pinned {
				ready <- base
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(ready)
	}()
	select {
	case base, ok := <-ready:
		if ok {
			c.base = base
			return c
		}
		c.exit = cmd.Wait()
		return c
	case <-time.After(120 * time.Second):
		t.Fatalf("no ready line from the child; stderr:\n%s", c.stderr)
	}
	return nil
}

// stop closes the child's stdin and waits for its clean exit.
func (c *serveChild) stop(t *testing.T) {
	t.Helper()
	_ = c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("the child did not stop cleanly: %v\n%s", err, c.stderr)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestServeRefusesALostLog accepts 30 requests on a real `acds serve`,
// kills it with SIGKILL, damages its store's files as each fault says —
// the write-ahead log deleted, its first frame corrupted, it truncated,
// the database file emptied, deleted (the data directory's keys,
// replica.id and mark still there), deleted with its mark, truncated —
// and restarts it: it must either start with every acknowledged request
// or refuse to start naming the loss and the way out. Each refusal is
// then accepted with --accept-data-loss once, after which the server
// starts without it. The log faults are made with every commit still in
// the log (a read transaction held in the child keeps checkpoints from
// passing it), the database faults with every commit checkpointed into
// the database file, so that each fault loses what it can.
func TestServeRefusesALostLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several server processes per fault")
	}
	type fault struct {
		name  string
		pin   bool
		do    func(t *testing.T, db string)
		wants string // in the refusal
	}
	rm := func(t *testing.T, paths ...string) {
		for _, p := range paths {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	half := func(t *testing.T, path string) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	}
	faults := []fault{
		{"wal-deleted", true, func(t *testing.T, db string) { rm(t, db+"-wal", db+"-shm") }, "behind its high-water mark"},
		{"wal-first-frame-corrupt", true, func(t *testing.T, db string) {
			f, err := os.OpenFile(db+"-wal", os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, 32+24+100); err != nil {
				t.Fatal(err)
			}
			rm(t, db+"-shm")
		}, "behind its high-water mark"},
		{"wal-truncated", true, func(t *testing.T, db string) { half(t, db+"-wal"); rm(t, db+"-shm") }, "behind its high-water mark"},
		{"db-emptied", false, func(t *testing.T, db string) {
			if err := os.Truncate(db, 0); err != nil {
				t.Fatal(err)
			}
			rm(t, db+"-wal", db+"-shm")
		}, "new or empty"},
		{"db-deleted", false, func(t *testing.T, db string) { rm(t, db, db+"-wal", db+"-shm") }, "new or empty"},
		{"db-and-mark-deleted", false, func(t *testing.T, db string) { rm(t, db, db+"-wal", db+"-shm", db+"-mark") }, "the installation holds state"},
		{"db-truncated", false, func(t *testing.T, db string) { half(t, db) }, "damaged"},
	}
	bundle := json.RawMessage(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":{"resourceType":"Patient","id":"p1","gender":"female"}}]}`)
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			dir := t.TempDir()
			if _, err := sim.NewBackend(filepath.Join(dir, "enclave"), sim.Options{RSABits: 2048}); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(dir, "acds.db")
			args := []string{"--addr", "127.0.0.1:0", "--enclave", "sev-snp-sim", "--workers", "1", "--rate-limit", "0", "--log-level", "warn", "--data-dir", dir}

			child := startServeChild(t, f.pin, args...)
			if child.base == "" {
				t.Fatalf("the first start failed: %v\n%s", child.exit, child.stderr)
			}
			c, _ := client.New(child.base, &client.Options{PollInterval: 20 * time.Millisecond})
			sess, err := c.Anon(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			c = c.WithToken(sess.Token)
			var ids []string
			for range 30 {
				acc, err := c.Process(ctx, acds.ProcessRequest{Data: bundle, OutputFormat: acds.OutputFHIRR4})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, acc.RequestID)
			}
			if !f.pin { // every commit checkpointed, the log truncated
				for _, id := range ids {
					if _, err := c.Wait(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if fi, err := os.Stat(db + "-wal"); err == nil && fi.Size() == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the log was not truncated")
					}
				}
			}
			if err := child.cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			_ = child.cmd.Wait()
			f.do(t, db)

			again := startServeChild(t, false, args...)
			if again.base != "" {
				c2, _ := client.New(again.base, &client.Options{Token: sess.Token})
				for _, id := range ids {
					if _, err := c2.Request(ctx, id); err != nil {
						t.Fatalf("started, but acknowledged request %s: %v", id, err)
					}
				}
				t.Logf("started with all %d acknowledged requests", len(ids))
				again.stop(t)
				return
			}
			msg := again.stderr.String()
			var ee *exec.ExitError
			if !errors.As(again.exit, &ee) || ee.ExitCode() != 1 || !strings.Contains(msg, "refusing to start") ||
				!strings.Contains(msg, f.wants) || !strings.Contains(msg, "--accept-data-loss") {
				t.Fatalf("exit %v, stderr:\n%s", again.exit, msg)
			}
			t.Logf("refused: %s", strings.TrimSpace(msg))
			if f.wants == "damaged" {
				// Not accepted as it is: moved away, the store starts
				// new, which the mark then counts as a loss to accept.
				if r := startServeChild(t, false, append(args, "--accept-data-loss")...); r.base != "" {
					t.Fatal("a damaged database was accepted")
				}
				for _, s := range []string{"", "-wal", "-shm"} {
					if err := os.Rename(db+s, db+s+".damaged"); err != nil && !errors.Is(err, os.ErrNotExist) {
						t.Fatal(err)
					}
				}
			}
			accepted := startServeChild(t, false, append(args, "--accept-data-loss")...)
			if accepted.base == "" {
				t.Fatalf("--accept-data-loss: %v\n%s", accepted.exit, accepted.stderr)
			}
			c3, _ := client.New(accepted.base, nil)
			if _, err := c3.Anon(ctx, ""); err != nil {
				t.Fatal(err)
			}
			accepted.stop(t)
			if !strings.Contains(accepted.stderr.String(), "started on a store that lost data") {
				t.Errorf("the accepted loss is not logged:\n%s", accepted.stderr)
			}
			after := startServeChild(t, false, args...)
			if after.base == "" {
				t.Fatalf("after the accepted loss: %v\n%s", after.exit, after.stderr)
			}
			after.stop(t)
		})
	}
}

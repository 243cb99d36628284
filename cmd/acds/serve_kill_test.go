package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/server"
)

// TestServeHelperProcess is not a test: TestServeKill9Restart runs the test
// binary with ACDS_SERVE_HELPER=1 to get a real `acds serve` process it can
// SIGKILL. The child serves until its stdin closes.
func TestServeHelperProcess(t *testing.T) {
	if os.Getenv("ACDS_SERVE_HELPER") != "1" {
		t.Skip("helper process for TestServeKill9Restart")
	}
	f, err := parseServeFlags(env{args: strings.Split(os.Getenv("ACDS_SERVE_ARGS"), "\x1f"), stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	err = serve(ctx, f, os.Stdout, log, func(c *server.Config) {
		c.Lease = time.Second
		c.PollInterval = 100 * time.Millisecond
	})
	if err != nil {
		t.Fatal(err)
	}
}

// startChild runs the helper process and returns its base URL and the command.
func startChild(t *testing.T, args ...string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ACDS_SERVE_HELPER=1", "ACDS_SERVE_ARGS="+strings.Join(args, "\x1f"))
	cmd.Stderr = os.Stderr
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
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := readyRE.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m[1]
			}
		}
		close(ready)
	}()
	select {
	case base, ok := <-ready:
		if !ok {
			t.Fatal("the child exited without a ready line")
		}
		return base, cmd
	case <-time.After(90 * time.Second):
		t.Fatal("no ready line from the child")
	}
	return "", nil
}

// TestServeKill9Restart accepts requests on a real `acds serve` process,
// kills it with SIGKILL while it works, restarts it on the same data
// directory and checks that every accepted request completes: none is lost
// or left processing.
func TestServeKill9Restart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two server processes")
	}
	dir := t.TempDir()
	args := []string{"--addr", "127.0.0.1:0", "--data-dir", dir, "--workers", "2", "--log-level", "warn"}
	base, cmd := startChild(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c, _ := client.New(base, nil)
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	bundle := json.RawMessage(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":{"resourceType":"Patient","id":"p1","gender":"female"}}]}`)
	const n = 40
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / 8 {
				acc, err := c.Process(ctx, acds.ProcessRequest{Data: bundle, OutputFormat: acds.OutputFHIRR4})
				if err != nil {
					t.Errorf("process: %v", err)
					return
				}
				mu.Lock()
				ids = append(ids, acc.RequestID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no drain, no cleanup
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(ids) != n {
		t.Fatalf("%d of %d requests accepted", len(ids), n)
	}

	base, _ = startChild(t, args...)
	c2, _ := client.New(base, &client.Options{Token: sess.Token, PollInterval: 50 * time.Millisecond})
	for _, id := range ids {
		rec, err := c2.Wait(ctx, id)
		if err != nil {
			t.Fatalf("request %s after restart: %v", id, err)
		}
		if rec.Status != acds.StatusCompleted {
			t.Fatalf("request %s = %s %+v", id, rec.Status, rec.Error)
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls/notary"
)

// startNotaryCmd runs `acds notary` with args and returns the public key
// block it printed, its listen address and a stop function returning the
// exit code.
func startNotaryCmd(t *testing.T, args ...string) (pubPEM []byte, addr string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runNotary(ctx, env{args: args, stdout: pw, stderr: &stderr, getenv: func(string) string { return "" }})
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	var out bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		out.WriteString(line)
		if strings.HasPrefix(line, "acds notary listening on ") {
			addr = strings.TrimSpace(strings.TrimPrefix(line, "acds notary listening on "))
			break
		}
		if err != nil {
			cancel()
			t.Fatalf("notary exited early (code %d): %s %s", <-code, out.String(), stderr.String())
		}
	}
	go io.Copy(io.Discard, br)
	return out.Bytes(), addr, func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("notary did not stop")
			return -1
		}
	}
}

func TestNotaryCommandCreatesKeyAndServes(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "notary.key")
	out, addr, stop := startNotaryCmd(t, "--addr", "127.0.0.1:0", "--key", keyFile)
	blk, _ := pem.Decode(out)
	if blk == nil {
		t.Fatalf("no PEM public key in output %q", out)
	}
	pub, err := notary.ParsePublicKey(out)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", st.Mode().Perm())
	}
	// The control endpoint answers: an unknown session is 404.
	resp, err := http.Post("http://"+addr+notary.FinalizePath("00112233445566778899aabbccddeeff"), "application/json", strings.NewReader(`{"clientRecords":1,"serverRecords":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("finalize of unknown session: status %d, want 404", resp.StatusCode)
	}
	if c := stop(); c != 0 {
		t.Fatalf("exit code %d, want 0", c)
	}

	// A second run reuses the key.
	out2, _, stop2 := startNotaryCmd(t, "--addr", "127.0.0.1:0", "--key", keyFile)
	pub2, err := notary.ParsePublicKey(out2)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(pub2) {
		t.Fatal("second run made a new key instead of reading the file")
	}
	if c := stop2(); c != 0 {
		t.Fatalf("exit code %d, want 0", c)
	}
}

func TestNotaryCommandErrors(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		var stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c := runNotary(ctx, env{args: args, stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }})
		return c, stderr.String()
	}
	if c, _ := run("--nope"); c != 2 {
		t.Errorf("unknown flag: exit %d, want 2", c)
	}
	if c, _ := run("extra"); c != 2 {
		t.Errorf("stray argument: exit %d, want 2", c)
	}
	loose := filepath.Join(dir, "loose.key")
	if err := os.WriteFile(loose, []byte("irrelevant"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, msg := run("--addr", "127.0.0.1:0", "--key", loose); c != 1 || !strings.Contains(msg, "chmod 600") {
		t.Errorf("world-readable key: exit %d (%q), want 1 with advice", c, msg)
	}
	garbage := filepath.Join(dir, "garbage.key")
	if err := os.WriteFile(garbage, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, _ := run("--addr", "127.0.0.1:0", "--key", garbage); c != 1 {
		t.Errorf("garbage key: exit %d, want 1", c)
	}
	if c, _ := run("--addr", "127.0.0.1:0", "--key", filepath.Join(dir, "k2"), "--portal-ca", filepath.Join(dir, "missing.pem")); c != 1 {
		t.Errorf("missing --portal-ca: exit %d, want 1", c)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if c, _ := run("--addr", l.Addr().String(), "--key", filepath.Join(dir, "k3")); c != 1 {
		t.Errorf("address in use: exit %d, want 1", c)
	}
}

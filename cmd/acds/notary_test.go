package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
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
	"github.com/acds-project/acds/mpctls/notary/notarytest"
	"github.com/acds-project/acds/mpctls/prover"
)

// startNotaryCmd runs `acds notary` with args and returns the public key
// block it printed, its listen address and a stop function returning the
// exit code.
func startNotaryCmd(t *testing.T, args ...string) (pubPEM []byte, addr string, stop func() int) {
	pub, addr, stop, _ := startNotaryCmdLog(t, args...)
	return pub, addr, stop
}

// startNotaryCmdLog is startNotaryCmd that also returns the command's
// stderr, to read after stop.
func startNotaryCmdLog(t *testing.T, args ...string) (pubPEM []byte, addr string, stop func() int, stderr *bytes.Buffer) {
	t.Helper()
	return startNotaryCmdResolver(t, nil, args...)
}

// startNotaryCmdResolver is startNotaryCmdLog with the resolver the
// command resolves portal names with (nil: the system's).
func startNotaryCmdResolver(t *testing.T, resolver *net.Resolver, args ...string) (pubPEM []byte, addr string, stop func() int, stderr *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr = new(bytes.Buffer)
	code := make(chan int, 1)
	go func() {
		code <- runNotary(ctx, env{args: args, stdout: pw, stderr: stderr, getenv: func(string) string { return "" }, resolver: resolver})
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
	}, stderr
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

// TestNotaryCommandNotarizes runs a real notarized fetch through `acds
// notary` trusting a portal CA given with --portal-ca. The command's
// resolver is the system's, so the portal is "localhost", which only
// --allow-private-targets lets it dial.
func TestNotaryCommandNotarizes(t *testing.T) {
	dir := t.TempDir()
	ca := notarytest.NewCA(t)
	caFile := filepath.Join(dir, "portal-ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "localhost")}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "portal says hi") }))
	out, addr, stop, stderr := startNotaryCmdLog(t, "--addr", "127.0.0.1:0", "--key", filepath.Join(dir, "k"), "--portal-ca", caFile, "--allow-private-targets")
	pub, err := notary.ParsePublicKey(out)
	if err != nil {
		t.Fatal(err)
	}
	d := &prover.Dialer{Notary: addr, NotaryKeys: []ed25519.PublicKey{pub}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
	resp, err := (&http.Client{Transport: tr}).Get("https://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	res, err := d.FinalizeAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := stop(); c != 0 {
		t.Fatalf("exit %d", c)
	}
	if !strings.Contains(stderr.String(), "session "+res[0].SessionID+" localhost") || !strings.Contains(stderr.String(), ": signed") {
		t.Fatalf("no session log line in %q", stderr.String())
	}
}

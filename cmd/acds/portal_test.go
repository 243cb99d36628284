package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// startPortalCmd runs `acds portal` with args and returns what it printed
// up to the listening line, the FHIR base URL and a stop function
// returning the exit code.
func startPortalCmd(t *testing.T, args ...string) (out, base string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runPortal(ctx, env{args: args, stdout: pw, stderr: &stderr, getenv: func(string) string { return "" }})
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if v, ok := strings.CutPrefix(line, "FHIR base URL: "); ok {
			base = strings.TrimSpace(v)
		}
		if strings.HasPrefix(line, "acds portal listening on ") {
			break
		}
		if err != nil {
			cancel()
			t.Fatalf("portal exited early (code %d): %s %s", <-code, b.String(), stderr.String())
		}
	}
	go io.Copy(io.Discard, br)
	return b.String(), base, func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("portal did not stop")
			return -1
		}
	}
}

func TestPortalCommandServesTheDemo(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	out, base, stop := startPortalCmd(t, "--addr", "127.0.0.1:0", "--ca-out", ca, "--patients", "3", "--seed", "7")
	if !strings.HasPrefix(base, "https://localhost:") || !strings.HasSuffix(base, "/fhir") {
		t.Fatalf("base URL %q", base)
	}
	for _, want := range []string{`username "demo"`, `password "demo-password"`, "patient pat-0003", portal.DemoClientID} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	pemBytes, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatal("no certificate in --ca-out")
	}
	hc := &http.Client{Transport: portal.Guard{AllowPrivate: true}.Transport(&tls.Config{RootCAs: roots})}
	c := &portal.Connector{Guard: portal.Guard{AllowPrivate: true}}
	for _, st := range acds.SystemTypes() {
		rec, err := c.Fetch(context.Background(), hc, portal.Request{SystemType: st, PortalURL: base, RecordID: "pat-0002",
			Credentials: portal.Credentials{Username: demoportal.Username, Password: demoportal.Password}})
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if rec.Resources < 10 {
			t.Errorf("%s: %d resources", st, rec.Resources)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

func TestPortalCommandFaultFlags(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	_, base, stop := startPortalCmd(t, "--addr", "127.0.0.1:0", "--ca-out", ca, "--patients", "1", "--fail-mfa")
	defer stop()
	pemBytes, _ := os.ReadFile(ca)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Transport: portal.Guard{AllowPrivate: true}.Transport(&tls.Config{RootCAs: roots})}
	_, err := (&portal.Connector{Guard: portal.Guard{AllowPrivate: true}}).Fetch(context.Background(), hc, portal.Request{
		SystemType: acds.SystemSMARTForm, PortalURL: base, RecordID: "pat-0001",
		Credentials: portal.Credentials{Username: demoportal.Username, Password: demoportal.Password}})
	if !errors.Is(err, portal.ErrMFARequired) {
		t.Fatalf("error %v, want MFA required", err)
	}
}

// TestPortalCommandLoginStyle: --login-style and --chooser draw the
// login as another provider does, which smart-form signs in through.
func TestPortalCommandLoginStyle(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	_, base, stop := startPortalCmd(t, "--addr", "127.0.0.1:0", "--ca-out", ca, "--patients", "1", "--login-style", "dex", "--chooser")
	defer stop()
	pemBytes, _ := os.ReadFile(ca)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Transport: portal.Guard{AllowPrivate: true}.Transport(&tls.Config{RootCAs: roots})}
	rec, err := (&portal.Connector{Guard: portal.Guard{AllowPrivate: true}}).Fetch(context.Background(), hc, portal.Request{
		SystemType: acds.SystemSMARTForm, PortalURL: base,
		Credentials: portal.Credentials{Username: demoportal.Username, Password: demoportal.Password}})
	if err != nil || rec.Resources < 10 {
		t.Fatalf("smart-form through the Dex-style chooser and pages: %v", err)
	}
}

func TestPortalCommandUsage(t *testing.T) {
	for _, args := range [][]string{{"--patients", "0"}, {"--nope"}, {"extra"}, {"--seed", "-1"}, {"--login-style", "keycloak"}} {
		var stderr bytes.Buffer
		if code := runPortal(context.Background(), env{args: args, stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }}); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	var stderr bytes.Buffer
	if code := runPortal(context.Background(), env{args: []string{"--addr", "256.0.0.1:99999"}, stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }}); code != 1 {
		t.Errorf("bad address: exit %d, want 1", code)
	}
}

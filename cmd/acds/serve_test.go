package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/verify"
)

// lockedBuffer collects stderr (the logs) safely.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// readyRE is the ready line: the start scripts parse, then the enclave and
// the measurement verifiers must expect.
var readyRE = regexp.MustCompile(`^acds \d+\.\d+\.\d+ serving on (https?://127\.0\.0\.1:\d+) \(enclave ([a-z-]+)(, simulated)?; measurement ([0-9a-f]{64,128})\)$`)

// startServe runs `acds serve` in-process on a free loopback port and
// returns its base URL once the ready line is printed, the logs, and a
// stop function that cancels (as SIGTERM does) and returns the exit code.
func startServe(t *testing.T, args ...string) (string, *lockedBuffer, func() int) {
	t.Helper()
	ready, logs, stop := startServeReady(t, args...)
	return ready[1], logs, stop
}

// startServeReady is startServe returning the submatches of readyRE: the
// base URL, the enclave profile, ", simulated" or "", the measurement.
func startServeReady(t *testing.T, args ...string) ([]string, *lockedBuffer, func() int) {
	t.Helper()
	pr, pw := io.Pipe()
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		code := runServe(ctx, env{args: args, stdout: pw, stderr: logs, getenv: func(string) string { return "" }})
		pw.Close()
		done <- code
	}()
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var ready []string
	select {
	case l, ok := <-lines:
		m := readyRE.FindStringSubmatch(l)
		if !ok || m == nil {
			cancel()
			t.Fatalf("ready line = %q (ok %v); logs:\n%s", l, ok, logs)
		}
		ready = m
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("no ready line; logs:\n%s", logs)
	}
	stopped := false
	var code int
	stop := func() int {
		if !stopped {
			stopped = true
			cancel()
			select {
			case code = <-done:
			case <-time.After(40 * time.Second):
				t.Fatal("acds serve did not stop after cancellation")
			}
			for l := range lines {
				t.Errorf("unexpected extra stdout line %q", l)
			}
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return ready, logs, stop
}

func TestServeFullFlow(t *testing.T) {
	dir := t.TempDir()
	base, logs, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", dir, "--workers", "2", "--log-level", "debug")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.New(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "healthy" || h.Enclave != "sev-snp-sim" || h.Version != acds.Version {
		t.Fatalf("health = %+v, %v", h, err)
	}
	a, err := c.Attestation(ctx)
	if err != nil || a.Profile != "sev-snp-sim" || len(a.Certificates) == 0 || len(a.SigningKey) == 0 || len(a.Boot) == 0 {
		t.Fatalf("attestation = %+v, %v", a, err)
	}
	// The boot evidence verifies offline, binding the signing key served.
	pol, err := verify.TrustEnclave(verify.Policy{}, mustBoot(t, a.Boot), mustHex(t, a.Measurement))
	if err != nil {
		t.Fatal(err)
	}
	bv, err := verify.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	br, err := bv.VerifyBoot(a.Boot)
	if err != nil || !br.TEEQuoteVerified || !br.EnclaveHashMatch {
		t.Fatalf("boot evidence: %+v, %v", br, err)
	}
	const passphrase = "serve-test PASSPHRASE 4471"
	sess, err := c.Anon(ctx, passphrase)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	in := []byte(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Chalmers","given":["Peter"]}],"gender":"male","birthDate":"1974-12-25"}}]}`)
	for _, format := range []string{acds.OutputFHIRR4, acds.OutputFHIRR4Deidentified} {
		acc, err := c.Process(ctx, acds.ProcessRequest{Data: in, OutputFormat: format})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := c.Wait(ctx, acc.RequestID)
		if err != nil || rec.Status != acds.StatusCompleted {
			t.Fatalf("%s: %+v %+v %v", format, rec, rec.Error, err)
		}
		sum := sha256.Sum256(rec.Result.Output)
		if rec.Result.OutputDigest != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Fatalf("digest mismatch")
		}
		if format == acds.OutputFHIRR4Deidentified && strings.Contains(string(rec.Result.Output), "Chalmers") {
			t.Fatalf("de-identified output contains the family name")
		}
		v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: rec.Result.Output})
		if err != nil || !v.Valid || !v.TEEQuoteVerified || !v.EnclaveHashMatch || v.Details.RequestID != acc.RequestID || v.Details.Source != acds.SourceRaw {
			t.Fatalf("verify = %+v, %v", v, err)
		}
	}
	// Invalid FHIR is refused at acceptance.
	_, err = c.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(`{"resourceType":"Patient","gender":"robot"}`), OutputFormat: acds.OutputFHIRR4})
	var p *acds.Problem
	if !errors.As(err, &p) || p.Code() != acds.ProblemInvalidFHIR || len(p.OperationOutcome) == 0 {
		t.Fatalf("invalid FHIR: %v", err)
	}
	// A portal on a private address is refused before anything is dialled.
	_, err = c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: "https://127.0.0.1:1/fhir",
		RecordID: "1", Username: "serve-USER-9931", Password: "serve-PASSWORD-5517", OutputFormat: acds.OutputFHIRR4})
	if !errors.As(err, &p) || p.Code() != acds.ProblemForbiddenPortal {
		t.Fatalf("private portal: %v", err)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d; logs:\n%s", code, logs)
	}
	l := logs.String()
	for _, secret := range []string{passphrase, sess.Token, sess.Token[5:], "serve-USER-9931", "serve-PASSWORD-5517"} {
		if strings.Contains(l, secret) {
			t.Errorf("logs contain the secret %q", secret)
		}
	}
	if !strings.Contains(l, `"msg":"stopped"`) {
		t.Errorf("no drain in the logs:\n%s", l)
	}
	if fi, err := os.Stat(filepath.Join(dir, "acds.db")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("store file: %v %v", fi, err)
	}

	// A restart on the same data dir keeps sessions and requests.
	base, _, stop = startServe(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	c2, _ := client.New(base, &client.Options{Token: sess.Token})
	if l, err := c2.Requests(ctx, "", 10); err != nil || len(l.Items) != 2 {
		t.Fatalf("after restart: %+v %v", l, err)
	}
	stop()
}

func TestServeTLS(t *testing.T) {
	base, _, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--tls")
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("base = %s", base)
	}
	// Trust the server by its attested key, not by a CA: the certificate's
	// public key must be the TLS key bound in the boot evidence.
	var leafKey []byte
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // replaced by the check below
		VerifyConnection: func(cs tls.ConnectionState) error {
			leafKey = cs.PeerCertificates[0].RawSubjectPublicKeyInfo
			return nil
		},
	}}}
	c, _ := client.New(base, &client.Options{HTTPClient: hc})
	a, err := c.Attestation(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(a.TLSKey) == 0 || !bytes.Equal(a.TLSKey, leafKey) {
		t.Fatalf("the served certificate's key is not the attested TLS key")
	}
	// `acds verify --server` accepts it as a (simulated) enclave.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"verify", "--server", base, "--allow-simulated"},
		env{stdout: &out, stderr: &errOut, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("acds verify --server: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	stop()
}

func TestServeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"},
		{"--addr", "nonsense"},
		{"--workers", "0"},
		{"--rate-limit", "-1"},
		{"--retention", "-1h"},
		{"--max-queue", "-5"},
		{"--retention", "30 days"},
		{"--log-level", "loud"},
		{"--store", "mysql://x"},
		{"--notary", "127.0.0.1:7047"},
		{"--notary-key", "/nonexistent/key"},
		{"--portal-ca", "/nonexistent/ca.pem"},
		{"extra"},
	} {
		var stderr bytes.Buffer
		code := runServe(context.Background(), env{args: args, stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }})
		if code != 2 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := runServe(context.Background(), env{args: []string{"-h"}, stdout: &stderr, stderr: io.Discard}); code != 0 || // help goes to standard output
		!strings.Contains(stderr.String(), "--allow-private-portals") && !strings.Contains(stderr.String(), "-allow-private-portals") {
		t.Errorf("-h: exit %d, %s", code, stderr.String())
	}
}

// TestServeRetentionFlag maps --retention onto the server: a duration as
// given, 0 keeping everything (a negative Config.Retention).
func TestServeMaxQueueFlag(t *testing.T) {
	for arg, want := range map[string]int{"5000": 5000, "12": 12, "0": -1} {
		f, err := parseServeFlags(env{args: []string{"--max-queue", arg}, stdout: io.Discard, stderr: io.Discard})
		if err != nil {
			t.Fatalf("--max-queue %s: %v", arg, err)
		}
		if got := maxQueueConfig(f.maxQueue); got != want {
			t.Errorf("--max-queue %s: Config.MaxQueue %d, want %d", arg, got, want)
		}
	}
}

// TestServeVerifyRateLimitFlag maps --verify-rate-limit onto the server:
// a rate as given, 0 turning the limit off; a negative rate is a usage
// error.
func TestServeVerifyRateLimitFlag(t *testing.T) {
	for arg, want := range map[string]float64{"10": 10, "0.5": 0.5, "0": -1} {
		f, err := parseServeFlags(env{args: []string{"--verify-rate-limit", arg}, stdout: io.Discard, stderr: io.Discard})
		if err != nil {
			t.Fatalf("--verify-rate-limit %s: %v", arg, err)
		}
		if got := offWhenZero(f.verifyRateLimit); got != want {
			t.Errorf("--verify-rate-limit %s: Config.VerifyRateLimit %v, want %v", arg, got, want)
		}
	}
	if _, err := parseServeFlags(env{args: []string{"--verify-rate-limit", "-1"}, stdout: io.Discard, stderr: io.Discard}); err == nil {
		t.Error("--verify-rate-limit -1 was accepted")
	}
}

func TestServeRetentionFlag(t *testing.T) {
	for arg, want := range map[string]time.Duration{"720h": 720 * time.Hour, "1h30m": 90 * time.Minute, "0": -1} {
		f, err := parseServeFlags(env{args: []string{"--retention", arg}, stdout: io.Discard, stderr: io.Discard})
		if err != nil {
			t.Fatalf("--retention %s: %v", arg, err)
		}
		if got := retentionConfig(f.retention); got != want {
			t.Errorf("--retention %s: Config.Retention %v, want %v", arg, got, want)
		}
	}
}

func mustBoot(t *testing.T, b []byte) attestation.BootEvidence {
	t.Helper()
	ev, err := attestation.ParseBootEvidence(b)
	if err != nil {
		t.Fatal(err)
	}
	return *ev
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

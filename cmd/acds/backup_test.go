package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/client"
)

// TestBackupOfARunningServe runs `acds backup` against a running `acds
// serve`, starts `acds serve` on the backup and finds the session, the
// requests and their results there. The simulated enclave's keys are not
// in the backup (they are kept in the clear); restoring on the same
// simulated machine copies them, as the README says.
func TestBackupOfARunningServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two server processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if _, err := sim.NewBackend(filepath.Join(dir, "enclave"), sim.Options{RSABits: 2048}); err != nil {
		t.Fatal(err)
	}
	args := func(d string) []string {
		return []string{"--addr", "127.0.0.1:0", "--enclave", "sev-snp-sim", "--workers", "2", "--log-level", "warn", "--data-dir", d}
	}
	child := startServeChild(t, false, args(dir)...)
	if child.base == "" {
		t.Fatalf("%v\n%s", child.exit, child.stderr)
	}
	c, _ := client.New(child.base, &client.Options{PollInterval: 20 * time.Millisecond})
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	bundle := json.RawMessage(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":{"resourceType":"Patient","id":"p1","gender":"female"}}]}`)
	var done []*acds.Request
	for range 5 {
		acc, err := c.Process(ctx, acds.ProcessRequest{Data: bundle, OutputFormat: acds.OutputFHIRR4})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := c.Wait(ctx, acc.RequestID)
		if err != nil || rec.Status != acds.StatusCompleted {
			t.Fatalf("%+v %v", rec, err)
		}
		done = append(done, rec)
	}

	backup := filepath.Join(t.TempDir(), "backup")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"backup", "--data-dir", dir, backup}, env{stdout: &stdout, stderr: &stderr}); code != 0 {
		t.Fatalf("acds backup exit %d: %s", code, stderr.String())
	}
	t.Logf("acds backup: %s", stdout.String())
	for _, want := range []string{"backed up", "copied replica.id", "copied deidentify.key.sealed", "left out notary.key", "left out enclave/enclave-sim"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("acds backup printed no %q", want)
		}
	}
	if code := run(ctx, []string{"backup", "--data-dir", dir, backup}, env{stdout: &stdout, stderr: &stderr}); code != 1 {
		t.Errorf("a second backup into the same directory: exit %d", code)
	}
	if code := run(ctx, []string{"backup", "--data-dir", dir, "--store", "postgres://u@127.0.0.1/db", filepath.Join(t.TempDir(), "pg")}, env{stdout: &stdout, stderr: &stderr}); code != 1 ||
		!strings.Contains(stderr.String(), "pg_dump") {
		t.Errorf("a postgres backup: exit %d, %s", code, stderr.String())
	}
	child.stop(t)

	// The same simulated machine: its chip comes along.
	if out, err := exec.Command("cp", "-a", filepath.Join(dir, "enclave"), filepath.Join(backup, "enclave")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	restored := startServeChild(t, false, args(backup)...)
	if restored.base == "" {
		t.Fatalf("serving the backup: %v\n%s", restored.exit, restored.stderr)
	}
	c2, _ := client.New(restored.base, &client.Options{Token: sess.Token, PollInterval: 20 * time.Millisecond})
	for _, r := range done {
		got, err := c2.Request(ctx, r.RequestID)
		if err != nil || got.Status != acds.StatusCompleted || got.Result.OutputDigest != r.Result.OutputDigest {
			t.Fatalf("request %s served from the backup: %+v %v", r.RequestID, got, err)
		}
	}
	acc, err := c2.Process(ctx, acds.ProcessRequest{Data: bundle, OutputFormat: acds.OutputFHIRR4Deidentified})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := c2.Wait(ctx, acc.RequestID); err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("a new request on the restored installation: %+v %v", rec, err)
	}
	restored.stop(t)
	if _, err := os.Stat(filepath.Join(backup, "notary.key")); err != nil {
		t.Errorf("the restored installation made no notary key: %v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// --enclave: a kind not in the list is a usage error (2); naming hardware
// this machine lacks is a start-up error naming the device (1); auto
// without hardware simulates, saying so in the ready line, a warning in
// the log and /v1/health.
func TestServeEnclaveFlag(t *testing.T) {
	run := func(args ...string) (int, string) {
		var stderr bytes.Buffer
		code := runServe(context.Background(), env{args: args, stdout: &bytes.Buffer{}, stderr: &stderr, getenv: func(string) string { return "" }})
		return code, stderr.String()
	}
	if code, out := run("--enclave", "sgx", "--data-dir", t.TempDir()); code != 2 || !strings.Contains(out, "sev-snp-sim") {
		t.Errorf("--enclave sgx: exit %d, %q", code, out)
	}
	for _, tc := range []struct{ kind, device string }{{"tdx", "/dev/tdx_guest"}, {"sev-snp", "/dev/sev-guest"}} {
		if _, err := os.Stat(tc.device); err == nil {
			continue
		}
		if _, err := os.Stat("/sys/kernel/config/tsm/report"); err == nil {
			continue
		}
		if code, out := run("--enclave", tc.kind, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()); code != 1 || !strings.Contains(out, tc.device) {
			t.Errorf("--enclave %s here: exit %d, %q", tc.kind, code, out)
		}
	}
	tpm := t.TempDir() + "/tpmrm0"
	if code, out := run("--enclave", "tpm", "--tpm-device", tpm, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()); code != 1 || !strings.Contains(out, tpm) {
		t.Errorf("--enclave tpm --tpm-device %s: exit %d, %q", tpm, code, out)
	}

	for _, p := range []string{"/dev/sev-guest", "/dev/tdx_guest", "/dev/tpmrm0", "/sys/kernel/config/tsm/report"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s present: auto would not simulate", p)
		}
	}
	ready, logs, _ := startServeReady(t, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	if ready[2] != "sev-snp-sim" || ready[3] != ", simulated" {
		t.Errorf("auto without hardware: ready line %q", ready[0])
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), "SIMULATED") {
		t.Errorf("auto's fallback is not in the log as a warning:\n%s", logs)
	}
}

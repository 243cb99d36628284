package mpctls

import (
	"bytes"
	"crypto/ed25519"
	"crypto/tls"
	"os"
	"os/exec"
	"testing"
)

// TestGoTLS13ChaCha20 runs a crypto/tls client and server that negotiate
// TLS_CHACHA20_POLY1305_SHA256, which they only do on machines without
// AES-GCM hardware: the test re-runs itself with GODEBUG=cpu.aes=off.
// (No crypto/tls pair ever picks TLS_AES_256_GCM_SHA384; the openssl
// interop test covers that suite.)
func TestGoTLS13ChaCha20(t *testing.T) {
	if os.Getenv("MPCTLS_TEST_CHILD") != "chacha" {
		if testing.Short() {
			t.Skip("re-runs the test binary")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestGoTLS13ChaCha20$", "-test.v")
		cmd.Env = append(os.Environ(), "MPCTLS_TEST_CHILD=chacha", "GODEBUG=cpu.aes=off")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestGoTLS13ChaCha20")) {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	key := testKey(t, 12)
	resp := bytes.Repeat([]byte{'c'}, 50_000)
	for _, ec := range []bool{false, true} {
		cap := goCase{version: tls.VersionTLS13, ecdsa: ec}.capture(t, resp)
		if cap.state.CipherSuite != tls.TLS_CHACHA20_POLY1305_SHA256 {
			t.Fatalf("negotiated %#04x", cap.state.CipherSuite)
		}
		hs, stmt := notarize(t, cap, key)
		p, err := BuildPresentation(cap.records, stmt, serverSecret(t, cap, hs), []uint64{hs.ServerProtectedFrom}, serverSeqs(cap, hs.ServerProtectedFrom))
		if err != nil {
			t.Fatal(err)
		}
		d, err := VerifyPresentation(stmt, p, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)})
		if err != nil || !bytes.Equal(d.Data(), resp) {
			t.Fatalf("presentation: %v", err)
		}
	}
}

package prover

import (
	"bytes"
	"crypto/tls"
	"os"
	"os/exec"
	"testing"

	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// TestInteropGoTLS13ChaCha20 covers TLS_CHACHA20_POLY1305_SHA256 with Go
// servers through the notary. crypto/tls picks it only without AES
// hardware, so the test re-runs itself with GODEBUG=cpu.aes=off. (No
// crypto/tls pair ever negotiates TLS_AES_256_GCM_SHA384: nginx and
// openssl cover it in TestInteropNginx.)
func TestInteropGoTLS13ChaCha20(t *testing.T) {
	if os.Getenv("ACDS_PROVER_TEST_CHILD") != "chacha" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInteropGoTLS13ChaCha20$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "ACDS_PROVER_TEST_CHILD=chacha", "GODEBUG=cpu.aes=off")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestInteropGoTLS13ChaCha20")) {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	ca := notarytest.NewCA(t)
	const host = "chacha.test"
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	for _, kt := range []notarytest.KeyType{notarytest.ECDSA, notarytest.RSA} {
		port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, kt, host)}}, servePayload())
		fr := fetch(t, n, ca.Pool(), host, port, nil, "/a", "/payload?n=70000")
		checkResult(t, n, fr.results[0], host, tls.VersionTLS13, tls.TLS_CHACHA20_POLY1305_SHA256)
		if !bytes.Contains(disclosed(t, n, fr.results[0]), payload(70000)) {
			t.Fatal("disclosed plaintext lacks the body")
		}
	}
}

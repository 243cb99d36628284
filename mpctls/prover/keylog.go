package prover

import (
	"bytes"
	"encoding/hex"
	"sync"
)

// keyLog receives crypto/tls's NSS key log lines for one connection and
// keeps them in memory only. It never writes them anywhere.
type keyLog struct {
	mu      sync.Mutex
	secrets map[string][]byte // label → secret
}

func (k *keyLog) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.secrets == nil {
		k.secrets = map[string][]byte{}
	}
	for _, line := range bytes.Split(p, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) != 3 {
			continue
		}
		secret := make([]byte, hex.DecodedLen(len(f[2])))
		if _, err := hex.Decode(secret, f[2]); err != nil {
			continue
		}
		k.secrets[string(f[0])] = secret
	}
	return len(p), nil
}

// get returns a copy of the secret logged under label, or nil.
func (k *keyLog) get(label string) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return bytes.Clone(k.secrets[label])
}

// wipe forgets every secret.
func (k *keyLog) wipe() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for l, s := range k.secrets {
		clear(s)
		delete(k.secrets, l)
	}
}

// Key log labels (NSS key log format, as crypto/tls writes them).
const (
	labelClientRandom    = "CLIENT_RANDOM"                   // TLS 1.2 master secret
	labelServerHandshake = "SERVER_HANDSHAKE_TRAFFIC_SECRET" // TLS 1.3
	labelServerTraffic0  = "SERVER_TRAFFIC_SECRET_0"         // TLS 1.3
)

package service

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/server"
)

// deidentificationKey returns the 32-byte HMAC key for de-identification
// pseudonyms. It is made once per installation and kept in path sealed by
// the enclave, so the same installation pseudonymises consistently and the
// key is never at rest in the clear. An enclave without persistent
// sealing (TDX) makes one per boot, kept in memory only: pseudonyms then
// differ from one boot to the next.
func deidentificationKey(e *attestation.Enclave, path string, log *slog.Logger) ([]byte, error) {
	const ad = "acds/v1/deidentification-key"
	if !e.PersistentSealing() {
		log.Warn("the de-identification key lasts for this boot only (the enclave cannot seal it): pseudonyms change at every restart")
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		return key, nil
	}
	if sealed, err := os.ReadFile(path); err == nil {
		key, err := e.Open(sealed, []byte(ad))
		if errors.Is(err, attestation.ErrSealedByOtherKey) {
			return nil, fmt.Errorf("de-identification key %s was sealed by another enclave (another backend, image or machine; this one is %s): %w; "+
				"use that enclave, or move the file away to make a new key (pseudonyms then change)", path, e.Profile(), err)
		}
		if err != nil {
			return nil, fmt.Errorf("de-identification key %s: %w", path, err)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("de-identification key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	sealed, err := e.Seal(key, []byte(ad))
	if err != nil {
		return nil, err
	}
	if err := writeNew(path, sealed); err != nil {
		return nil, fmt.Errorf("de-identification key: %w", err)
	}
	return key, nil
}

// writeNew creates path with mode 0600 and writes b to it; it never
// overwrites an existing file and removes a partly written one.
func writeNew(path string, b []byte) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := out.Write(b); err != nil {
		out.Close()
		os.Remove(path)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// replicaID returns this installation's replica id, made once and kept in
// path (not secret): the claim affinity of the fetches it accepts, so that
// replicas sharing a store each claim only the fetches they sealed, and a
// restarted replica (even one whose enclave seals per boot, TDX) finds
// its own.
func replicaID(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			return "", fmt.Errorf("replica id %s: want 32 hex digits", path)
		}
		return id, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("replica id: %w", err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	if err := writeNew(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("replica id: %w", err)
	}
	return id, nil
}

// replicaEnclave is the server's enclave with this replica's claim
// affinity (see server's affinity).
type replicaEnclave struct {
	server.Enclave
	affinity string
	trust    *sharedVerifier
}

// BootEvidence is the enclave's, with the policy of POST /v1/verify.
func (e replicaEnclave) BootEvidence() acds.Attestation {
	a := e.Enclave.BootEvidence()
	if e.trust != nil {
		a.VerifyPolicy = e.trust.verifyPolicy()
	}
	return a
}

// ClaimAffinity names this replica.
func (e replicaEnclave) ClaimAffinity() string { return e.affinity }

// jwsSigner is what the server's webhook deliveries need of an enclave
// besides server.Enclave (server's optional interface of the same name).
type jwsSigner interface {
	SignJWS(signingInput []byte) ([]byte, error)
	SigningKey() []byte
}

// signingReplicaEnclave is a replicaEnclave whose enclave signs webhook
// deliveries. Embedding server.Enclave hides the enclave's methods beyond
// that interface, so the server found none to sign with and refused every
// callbackUrl: they are passed on here.
type signingReplicaEnclave struct {
	replicaEnclave
	signer jwsSigner
}

// SignJWS signs with the enclave's attested boot key.
func (e signingReplicaEnclave) SignJWS(signingInput []byte) ([]byte, error) {
	return e.signer.SignJWS(signingInput)
}

// SigningKey is the boot signing key's SubjectPublicKeyInfo.
func (e signingReplicaEnclave) SigningKey() []byte { return e.signer.SigningKey() }

// withReplica wraps encl as this replica's enclave, keeping its signing.
func withReplica(encl server.Enclave, affinity string, trust *sharedVerifier) server.Enclave {
	re := replicaEnclave{encl, affinity, trust}
	if sg, ok := encl.(jwsSigner); ok {
		return signingReplicaEnclave{re, sg}
	}
	return re
}

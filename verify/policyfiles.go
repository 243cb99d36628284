package verify

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sim"
)

// ErrPolicyFiles: the sources a [PolicyFiles] names contradict each other.
var ErrPolicyFiles = errors.New("verify: policy sources contradict each other")

// PolicyFiles names a policy's trusted measurements as a command line or
// a configuration file gives them (`acds verify --policy FILE
// --manifest-key FILE --measurement HEX --tpm-ak FILE --tpm-ak-roots FILE
// --allow-simulated`).
type PolicyFiles struct {
	// Manifest is the path of a reference-value manifest: signed (then
	// ManifestKey is needed) or a JSON description trusted as given (see
	// manifest.Load). Exclusive with Measurements. Zero value: none.
	Manifest string
	// ManifestKey is the path of the manifest publisher's Ed25519 public
	// key (manifest.ReadPublicKey). Only with a signed Manifest. Zero
	// value: none.
	ManifestKey string
	// Measurements are code hashes in hex (ParseMeasurements): a policy
	// without a manifest. Exclusive with Manifest. Zero value: none.
	Measurements []string
	// TPMAKs are paths of PEM public keys ("PUBLIC KEY", PKIX; ECDSA or
	// RSA) of trusted TPM attestation keys (Policy.TPMTrustedAKs), such as
	// the tpm-ak.pem a TPM server writes. Exclusive with TPMAKRoots. Zero
	// value: none.
	TPMAKs []string
	// TPMAKRoots is the path of PEM certificates trusted to certify TPM
	// attestation keys (Policy.TPMRoots), such as a cloud vTPM's AK CA.
	// Zero value: none.
	TPMAKRoots string
	// UnsafeAllowSimulated accepts the simulated enclave of development
	// servers: it sets UnsafeAllowSimulation,
	// UnsafeTrustBundleSimulatedRoot and UnsafeTrustClaimedNotaryKey.
	// Zero value: off.
	UnsafeAllowSimulated bool
}

// LoadPolicy reads the files f names into a Policy with clock now (nil:
// time.Now), and returns with it a line saying where the policy's
// measurements come from. With neither Manifest nor Measurements the
// policy allows no measurement, which [New] refuses: the caller adds its
// own (as `acds verify` adds its binary's code hash) or reports it.
// LoadPolicy does not call New.
func LoadPolicy(f PolicyFiles, now func() time.Time) (Policy, string, error) {
	if now == nil {
		now = time.Now
	}
	p := Policy{Now: now}
	var source string
	switch {
	case f.Manifest != "" && len(f.Measurements) > 0:
		return Policy{}, "", fmt.Errorf("%w: a manifest and measurements exclude each other", ErrPolicyFiles)
	case f.Manifest == "" && f.ManifestKey != "":
		return Policy{}, "", fmt.Errorf("%w: a manifest key without a manifest", ErrPolicyFiles)
	case len(f.Measurements) > 0:
		ms, err := ParseMeasurements(f.Measurements...)
		if err != nil {
			return Policy{}, "", err
		}
		p.Measurements = ms
		source = fmt.Sprintf("policy: the code hash(es) given (%d), no manifest", len(f.Measurements))
	case f.Manifest != "":
		m, signed, err := manifest.Load(f.Manifest, f.ManifestKey, now())
		if err != nil {
			return Policy{}, "", err
		}
		p.Manifest = m
		source = "policy " + f.Manifest + " is an unsigned manifest description (trusted as given)"
		if signed {
			source = "policy " + f.Manifest + " signed by " + m.Issuer
		}
	}
	if len(f.TPMAKs) > 0 && f.TPMAKRoots != "" {
		return Policy{}, "", fmt.Errorf("%w: pinned TPM attestation keys and AK certificate roots exclude each other", ErrPolicyFiles)
	}
	for _, path := range f.TPMAKs {
		k, err := readPublicKey(path)
		if err != nil {
			return Policy{}, "", err
		}
		p.TPMTrustedAKs = append(p.TPMTrustedAKs, k)
	}
	if f.TPMAKRoots != "" {
		roots, err := readCertificates(f.TPMAKRoots)
		if err != nil {
			return Policy{}, "", err
		}
		p.TPMRoots = roots
	}
	if f.UnsafeAllowSimulated {
		p.UnsafeAllowSimulation = true
		p.UnsafeTrustBundleSimulatedRoot = true
		p.UnsafeTrustClaimedNotaryKey = true
	}
	return p, source, nil
}

// maxPEMFile bounds the key and certificate files LoadPolicy reads.
const maxPEMFile = 1 << 20

func readPEMFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEMFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPEMFile)
	}
	return b, nil
}

// readPublicKey reads a PEM "PUBLIC KEY" (PKIX) that is an ECDSA or RSA
// key: a TPM attestation key.
func readPublicKey(path string) (crypto.PublicKey, error) {
	b, err := readPEMFile(path)
	if err != nil {
		return nil, fmt.Errorf("TPM attestation key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("TPM attestation key %s: not a PEM PUBLIC KEY", path)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("TPM attestation key %s: %w", path, err)
	}
	switch k.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("TPM attestation key %s: a %T, want ECDSA or RSA", path, k)
}

// readCertificates reads one or more PEM certificates.
func readCertificates(path string) ([]*x509.Certificate, error) {
	b, err := readPEMFile(path)
	if err != nil {
		return nil, fmt.Errorf("TPM AK roots: %w", err)
	}
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("TPM AK roots %s: %w", path, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("TPM AK roots %s: no PEM certificate", path)
	}
	return certs, nil
}

// SelfMeasurements returns the measurements of a policy that allows only
// the code hash of the running executable ([sim.MeasureSelf]) under the
// simulated SEV-SNP profile, whose measurement that hash is, and the hash:
// the default of `acds verify` and `acds demo` without a manifest, for which
// a build checks the bundles of a server of the same build.
func SelfMeasurements() (map[string][][]byte, []byte, error) {
	self, err := sim.MeasureSelf()
	if err != nil {
		return nil, nil, err
	}
	return map[string][][]byte{attestation.ProfileSEVSNPSim: {self}}, self, nil
}

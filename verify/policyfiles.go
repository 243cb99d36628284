package verify

import (
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds/attestation/manifest"
)

// ErrPolicyFiles: the sources a [PolicyFiles] names contradict each other.
var ErrPolicyFiles = errors.New("verify: policy sources contradict each other")

// PolicyFiles names a policy's trusted measurements as a command line or
// a configuration file gives them (`acds verify --policy FILE
// --manifest-key FILE --measurement HEX --allow-simulated`).
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
	if f.UnsafeAllowSimulated {
		p.UnsafeAllowSimulation = true
		p.UnsafeTrustBundleSimulatedRoot = true
		p.UnsafeTrustClaimedNotaryKey = true
	}
	return p, source, nil
}

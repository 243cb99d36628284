package verify_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/verify"
)

// A simulated enclave attests one output; a verifier that trusts exactly
// that installation checks the bundle and the output offline.
func Example() {
	dir, _ := os.MkdirTemp("", "acds-example-")
	defer os.RemoveAll(dir)

	// The enclave side (what `acds serve` does once at start).
	backend, err := sim.NewBackend(dir, sim.Options{RSABits: 2048})
	if err != nil {
		panic(err)
	}
	enclave, err := attestation.New(context.Background(), backend, attestation.Options{})
	if err != nil {
		panic(err)
	}
	output := []byte(`{"resourceType":"Bundle","type":"collection"}`)
	bundle, err := enclave.Attest(context.Background(), attestation.Claims{
		RequestID:    "req-42",
		OutputFormat: "fhir_r4",
		OutputDigest: attestation.Digest(output),
		Source:       attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("input"))},
	}, nil)
	if err != nil {
		panic(err)
	}

	// The verifier side: trust this installation's simulated root and
	// measurement (a published manifest would list the measurement instead).
	policy, err := verify.TrustEnclave(verify.Policy{}, enclave.BootEvidence(), enclave.Measurement())
	if err != nil {
		panic(err)
	}
	v, err := verify.New(policy)
	if err != nil {
		panic(err) // a contradictory or empty policy
	}
	res, err := v.VerifyOutput(bundle, output)
	if err != nil {
		panic(err) // not a bundle at all
	}
	fmt.Println("valid:", res.Valid)
	fmt.Println("tee quote verified:", res.TEEQuoteVerified)
	fmt.Println("enclave hash match:", res.EnclaveHashMatch)
	fmt.Println("request:", res.Claims.RequestID, res.Claims.Source.Kind)
	fmt.Println("relaxations:", res.Relaxations)

	// Pinned simulated roots without UnsafeAllowSimulation contradict
	// each other: New names the field.
	policy.UnsafeAllowSimulation = false
	_, err = verify.New(policy)
	var pe *verify.PolicyError
	fmt.Println("refused field:", errors.As(err, &pe), pe.Field)
	// Output:
	// valid: true
	// tee quote verified: true
	// enclave hash match: true
	// request: req-42 raw
	// relaxations: [simulated SEV-SNP accepted (UnsafeAllowSimulation): proves the code path, not hardware]
	// refused field: true SimulatedRoots
}

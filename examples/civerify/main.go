// Command civerify verifies an ACDS attestation bundle offline and fails
// the build when it does not verify: a CI step that refuses data whose
// provenance cannot be proved.
//
//	civerify -policy manifest.signed -manifest-key publisher.pub -bundle attestation.b64 [-output output.json] [-require-mpc-tls]
//	civerify -measurement HEX -allow-simulated -bundle attestation.b64       (development servers)
//
// The bundle file holds the attestationBundle of a request's result,
// base64 or raw CBOR. With -output, the file must be the output the bundle
// attests: result.output saved byte for byte, or a pretty-printed copy of
// it (verify.VerifyOutput applies acds.OutputBytes, the rule POST
// /v1/verify applies too). Nothing is
// fetched: the trusted material is the signed reference-value manifest
// (or the measurement given) and the clock.
//
// Exit status: 0 the bundle verifies, 1 it does not (the reasons are
// printed), 2 usage error or unreadable input.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/verify"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("civerify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bundleFile := fs.String("bundle", "", "attestation bundle file (base64 or raw CBOR); required")
	outputFile := fs.String("output", "", "the output the bundle attests (as saved, or pretty-printed); its digest must match")
	policyFile := fs.String("policy", "", "signed reference-value manifest (acds manifest sign)")
	keyFile := fs.String("manifest-key", "", "the manifest publisher's Ed25519 public key file")
	measurement := fs.String("measurement", "", "instead of -policy: the one code hash (hex) to accept")
	allowSim := fs.Bool("allow-simulated", false, "accept simulated enclaves (development only) and the notary key they name")
	requireMPC := fs.Bool("require-mpc-tls", false, "also fail unless the data was fetched through verified MPC-TLS")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "civerify: "+format+"\n", a...)
		return 2
	}
	if *bundleFile == "" || fs.NArg() != 0 {
		return usage("-bundle FILE is required (and no other arguments)")
	}
	if (*policyFile == "") == (*measurement == "") {
		return usage("give either -policy (with -manifest-key) or -measurement")
	}

	p := verify.Policy{Now: time.Now, UnsafeAllowSimulation: *allowSim, UnsafeTrustBundleSimulatedRoot: *allowSim, UnsafeTrustClaimedNotaryKey: *allowSim}
	if *policyFile != "" {
		if *keyFile == "" {
			return usage("-policy needs -manifest-key")
		}
		pub, err := manifest.ReadPublicKey(*keyFile)
		if err != nil {
			return usage("-manifest-key: %v", err)
		}
		signed, err := os.ReadFile(*policyFile)
		if err != nil {
			return usage("-policy: %v", err)
		}
		m, err := manifest.Verify(signed, pub, time.Now())
		if err != nil {
			return usage("-policy: %v", err)
		}
		p.Manifest = m
	} else {
		ms, err := verify.ParseMeasurements(*measurement)
		if err != nil {
			return usage("-measurement: %v", err)
		}
		p.Measurements = ms
	}

	bundle, err := readBundle(*bundleFile)
	if err != nil {
		return usage("-bundle: %v", err)
	}
	v, err := verify.New(p)
	if err != nil {
		return usage("%v", err)
	}
	var res *verify.Result
	if *outputFile != "" {
		out, err := os.ReadFile(*outputFile)
		if err != nil {
			return usage("-output: %v", err)
		}
		res, err = v.VerifyOutput(bundle, out)
		if err != nil {
			return usage("%v", err)
		}
	} else if res, err = v.Verify(bundle); err != nil {
		return usage("%v", err)
	}

	ok := res.Valid && (!*requireMPC || res.MPCTLSVerified)
	verdict := "VALID"
	if !ok {
		verdict = "INVALID"
	}
	fmt.Fprintf(stdout, "%s: %s (profile %s, valid=%t enclaveHashMatch=%t mpcTlsVerified=%t teeQuoteVerified=%t, output checked: %t)\n",
		*bundleFile, verdict, res.Profile, res.Valid, res.EnclaveHashMatch, res.MPCTLSVerified, res.TEEQuoteVerified, res.OutputChecked)
	for _, r := range res.Reasons() {
		fmt.Fprintf(stdout, "  %s\n", r)
	}
	if *requireMPC && !res.MPCTLSVerified {
		fmt.Fprintln(stdout, "  -require-mpc-tls: the data was not fetched through verified MPC-TLS")
	}
	if !ok {
		return 1
	}
	return 0
}

// readBundle reads a bundle file as attestation.ReadBundle reads it: raw
// CBOR, or base64 (std or URL, padding optional, white space ignored).
func readBundle(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, attestation.MaxBundleTextSize+1))
	if err != nil {
		return nil, err
	}
	return attestation.ReadBundle(b)
}

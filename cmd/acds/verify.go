package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/verify"
)

// runVerify checks an attestation bundle offline (DESIGN §8).
//
//	acds verify BUNDLE [--policy FILE [--manifest-key FILE] | --measurement HEX…] [--allow-simulated] [--output FILE] [--json]
//	acds verify --server https://HOST:PORT [--policy FILE [--manifest-key FILE] | --measurement HEX…] [--allow-simulated] [--json]
//
// BUNDLE is a file holding the bundle as base64 or raw CBOR, or "-" for
// standard input. --policy is a signed manifest (checked with the
// publisher's Ed25519 public key from --manifest-key) or an unsigned JSON
// manifest description the caller vouches for. --measurement HEX
// (repeatable, exclusive with --policy) allows exactly those code hashes,
// without a manifest. Without either the expected code hash is this
// binary's (what `acds measure` prints) and no notary key is trusted. --allow-simulated accepts sev-snp-sim bundles, the
// simulated root they carry and the notary key their signed claims name.
// With --server it connects to a running server and checks, during the TLS
// handshake, that the certificate carries boot evidence valid under the
// policy and that its key is the TLS key the evidence binds.
// Exit 0 valid, 1 invalid, 2 usage error, unreadable input or connection
// error.
func runVerify(ctx context.Context, e env) int {
	flags := flag.NewFlagSet("acds verify", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	policyFile := flags.String("policy", "", "reference-value manifest: signed (with --manifest-key) or a JSON description; default none: the expected code hash is this acds binary's (acds measure)")
	manifestKey := flags.String("manifest-key", "", "Ed25519 public key file of the manifest publisher (PEM, hex or base64); default none (a signed --policy needs it)")
	allowSim := flags.Bool("allow-simulated", false, "accept the simulated enclave (development servers): its carried root and claimed notary key; default off")
	outputFile := flags.String("output", "", "the output the bundle attests, as saved or pretty-printed; its digest must be the attested outputDigest (acds.OutputBytes, as POST /v1/verify); default none: the output is not checked")
	asJSON := flags.Bool("json", false, "print the POST /v1/verify response object; default off: a text report")
	server := flags.String("server", "", "check a running server's attested TLS (https://HOST:PORT) instead of a BUNDLE; default none")
	var measurements hexList
	flags.Var(&measurements, "measurement", "allow the code hash `HEX` (repeatable): a policy without a manifest, exclusive with --policy; 96 hex digits for sev-snp, sev-snp-sim and tdx, 64 for tpm; default none: this acds binary's hash")
	flags.Usage = func() {
		w := e.stderr
		fmt.Fprintln(w, "usage: acds verify BUNDLE|- [--policy FILE [--manifest-key FILE] | --measurement HEX…] [--allow-simulated] [--output FILE] [--json]")
		fmt.Fprintln(w, "       acds verify --server https://HOST:PORT [--policy FILE | --measurement HEX…] [--allow-simulated] [--json]")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Verifies an attestation bundle offline (BUNDLE is a file holding it as base64")
		fmt.Fprintln(w, "or raw CBOR, - for standard input), or with --server a running server's")
		fmt.Fprintln(w, "attested TLS. Nothing is fetched: the trust comes from the policy and the clock.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Defaults: without --policy or --measurement the expected code hash is this acds")
		fmt.Fprintln(w, "binary's (what `acds measure` prints; go run, go build and -ldflags=-s -w builds")
		fmt.Fprintln(w, "each have another, so pass the server's with --measurement: its ready line prints")
		fmt.Fprintln(w, "it) and no notary key is trusted; no simulated enclave is accepted; the output is")
		fmt.Fprintln(w, "not checked; a text report.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Exit status: 0 valid, 1 invalid (the reasons are printed), 2 usage error,")
		fmt.Fprintln(w, "unreadable input or (with --server) connection error.")
		fmt.Fprintln(w)
		flags.PrintDefaults()
	}
	args, err := parseInterspersed(flags, e.args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if (*server == "") != (len(args) == 1) || (*server != "" && *outputFile != "") {
		flags.Usage()
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "acds verify: "+format+"\n", a...)
		return 2
	}

	if *policyFile != "" && len(measurements) > 0 {
		fmt.Fprintln(e.stderr, "acds verify: --policy and --measurement are exclusive: a manifest, or the code hashes given")
		return 2
	}

	p := verify.Policy{Now: time.Now}
	var notes []string
	selfHash := false
	if len(measurements) > 0 {
		if *manifestKey != "" {
			return fail("--manifest-key needs --policy")
		}
		ms, err := verify.ParseMeasurements(measurements...)
		if err != nil {
			return fail("--measurement: %v", err)
		}
		p.Measurements = ms
		notes = append(notes, fmt.Sprintf("policy: the code hash(es) given with --measurement (%d), no manifest", len(measurements)))
	} else if *policyFile != "" {
		m, note, err := loadPolicyManifest(*policyFile, *manifestKey)
		if err != nil {
			return fail("--policy: %v", err)
		}
		p.Manifest = m
		if note != "" {
			notes = append(notes, note)
		}
	} else {
		if *manifestKey != "" {
			return fail("--manifest-key needs --policy")
		}
		self, err := sim.MeasureSelf()
		if err != nil {
			return fail("%v", err)
		}
		p.Measurements = map[string][][]byte{attestation.ProfileSEVSNPSim: {self}}
		notes = append(notes, "no --policy: expecting this acds binary's code hash "+hex.EncodeToString(self))
		selfHash = true
	}
	if *allowSim {
		p.UnsafeAllowSimulation = true
		p.UnsafeTrustBundleSimulatedRoot = true
		p.UnsafeTrustClaimedNotaryKey = true
	}
	v, err := verify.New(p)
	if err != nil {
		return fail("%v", err)
	}

	if *server != "" {
		return verifyServer(ctx, e, *server, v, *asJSON, notes, selfHash)
	}

	bundle, err := readBundle(args[0], e.stdin)
	if err != nil {
		return fail("%v", err)
	}
	var output []byte
	if *outputFile != "" {
		if output, err = os.ReadFile(*outputFile); err != nil {
			return fail("--output: %v", err)
		}
	}
	var res *verify.Result
	if output != nil {
		res, err = v.VerifyOutput(bundle, output)
	} else {
		res, err = v.Verify(bundle)
	}
	if err != nil {
		return fail("%v", err)
	}
	return report(e, res, *asJSON, notes, selfHash)
}

// report prints a result (as text or as the /v1/verify JSON object) and
// returns the exit code: 0 valid, 1 not.
func report(e env, res *verify.Result, asJSON bool, notes []string, selfHash bool) int {
	if selfHash && !res.EnclaveHashMatch && res.TEEQuoteVerified {
		notes = append(notes, "the expected code hash is this acds binary's; a server built another way (go run, go build, -ldflags=-s -w) has another: "+
			"pass the one its ready line prints with --measurement HEX (or see acds measure FILE)")
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res.Response()); err != nil {
			fmt.Fprintf(e.stderr, "acds verify: %v\n", err)
			return 2
		}
	} else {
		printResult(e.stdout, res, notes)
	}
	if res.Valid {
		return 0
	}
	return 1
}

// verifyServer is the attested-TLS check of a running server: it connects,
// verifies the boot evidence in the server's certificate during the
// handshake (before anything is sent) and reports. A TLS server without
// evidence is not an enclave (exit 1); no TLS at all is a connection error
// (exit 2).
func verifyServer(ctx context.Context, e env, rawURL string, v *verify.Verifier, asJSON bool, notes []string, selfHash bool) int {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		fmt.Fprintf(e.stderr, "acds verify: --server wants https://HOST[:PORT], got %q\n", rawURL)
		return 2
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	var res *verify.Result
	cfg := &tls.Config{
		// The evidence, not a CA, authenticates the server: see
		// verify.(*Verifier).VerifyCertificate.
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS12,
		ServerName:         u.Hostname(),
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no server certificate")
			}
			res = v.VerifyCertificate(cs.PeerCertificates[0])
			if !res.Valid {
				return &verify.CertificateError{Result: res}
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if conn != nil {
		conn.Close()
	}
	if res == nil {
		fmt.Fprintf(e.stderr, "acds verify: %s: %v\n", addr, err)
		return 2
	}
	notes = append(notes, "attested TLS to "+addr)
	return report(e, res, asJSON, notes, selfHash)
}

// hexList is a repeatable flag of code hashes, checked as they are given.
type hexList []string

func (h *hexList) String() string { return strings.Join(*h, ",") }

func (h *hexList) Set(s string) error {
	if _, err := verify.ParseMeasurements(s); err != nil {
		return err
	}
	*h = append(*h, s)
	return nil
}

// parseInterspersed parses flags that may follow positional arguments, as
// in `acds verify bundle.b64 --json`. "--" ends the flags.
func parseInterspersed(flags *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := flags.Parse(args); err != nil {
			return nil, err
		}
		rest := flags.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// readBundle reads BUNDLE ("-" is stdin) and returns the CBOR bytes,
// decoding base64 (standard or URL alphabet, whitespace ignored) when the
// input is not raw CBOR.
func readBundle(name string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	limit := int64(attestation.MaxBundleSize)*4/3 + 4096
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than any bundle (%d bytes)", name, attestation.MaxBundleSize)
	}
	if len(data) > 0 && data[0] >= 0xa0 && data[0] <= 0xbf {
		return data, nil // a CBOR map: raw bundle
	}
	text := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, string(data))
	text = strings.TrimPrefix(strings.Trim(text, `"`), "base64:")
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(text); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s is neither raw CBOR nor base64", name)
}

// loadPolicyManifest reads --policy: a signed manifest verified with the
// key in keyFile, or (without a key) a JSON manifest description. Its
// errors say which of those the file is not, or why it fails.
func loadPolicyManifest(path, keyFile string) (*manifest.Manifest, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		if keyFile != "" {
			return nil, "", fmt.Errorf("%s is an unsigned JSON description; --manifest-key applies to signed manifests", path)
		}
		m, err := manifest.ParseDescription(data)
		if err != nil {
			return nil, "", fmt.Errorf("%s is not a valid JSON manifest description: %w", path, err)
		}
		return m, "policy " + path + " is an unsigned manifest description (trusted as given)", nil
	}
	if err := manifest.CheckSigned(data); err != nil {
		return nil, "", fmt.Errorf("%s is not a manifest: neither a signed manifest (acds manifest sign) nor a JSON manifest description: %w", path, err)
	}
	if keyFile == "" {
		return nil, "", fmt.Errorf("%s is a signed manifest: give the publisher's public key with --manifest-key", path)
	}
	pub, err := manifest.ReadPublicKey(keyFile)
	if err != nil {
		return nil, "", fmt.Errorf("--manifest-key: %w", err)
	}
	m, err := manifest.Verify(data, pub, time.Now())
	switch {
	case errors.Is(err, manifest.ErrSignature):
		return nil, "", fmt.Errorf("%s is a signed manifest, but its signature does not verify with the key in %s: %w", path, keyFile, err)
	case err != nil:
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return m, "policy " + path + " signed by " + m.Issuer, nil
}

func printResult(w io.Writer, r *verify.Result, notes []string) {
	verdict := "INVALID"
	if r.Valid {
		verdict = "VALID"
	}
	fmt.Fprintln(w, verdict)
	line := func(k, v string) { fmt.Fprintf(w, "  %-18s %s\n", k+":", v) }
	resp := r.Response()
	d := resp.Details
	line("profile", d.Profile)
	if d.Measurement == "" {
		d.Measurement = "(not established: see the reasons)"
	}
	line("measurement", d.Measurement)
	if r.Claims != nil {
		line("requestId", d.RequestID)
		line("issuedAt", d.IssuedAt.Format(time.RFC3339))
		line("outputDigest", d.OutputDigest)
		src := d.Source
		if d.PortalHost != "" {
			src += " (" + d.PortalHost + ")"
		}
		line("source", src)
	}
	line("teeQuoteVerified", fmt.Sprint(resp.TEEQuoteVerified))
	line("enclaveHashMatch", fmt.Sprint(resp.EnclaveHashMatch))
	if r.Claims != nil { // boot evidence alone (--server) has no sessions
		mpc := fmt.Sprint(resp.MPCTLSVerified)
		if r.Claims.Source.Kind == acds.SourceRaw {
			mpc += " (does not apply: raw submission)"
		}
		line("mpcTlsVerified", mpc)
	}
	line("certsValidNow", fmt.Sprint(r.CertificatesValidNow))
	if r.OutputChecked {
		line("outputChecked", "true")
	}
	for _, n := range notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	for _, reason := range d.Reasons {
		fmt.Fprintf(w, "  - %s\n", reason)
	}
}

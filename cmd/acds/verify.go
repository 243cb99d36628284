package main

import (
	"context"
	"crypto/tls"
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
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/verify"
	"github.com/acds-project/acds/verify/report"
)

// runVerify checks an attestation bundle offline (DESIGN §8).
//
//	acds verify BUNDLE [--policy FILE [--manifest-key FILE] | --measurement HEX…] [--allow-simulated] [--output FILE] [--json] [--html FILE]
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
	htmlFile := flags.String("html", "", "also write the verification report page (self-contained HTML, the page GET /verify shows) to `FILE`; the verdict and exit code are unchanged; default none")
	server := flags.String("server", "", "check a running server's attested TLS (https://HOST:PORT) instead of a BUNDLE; default none")
	var tpmAKs fileList
	flags.Var(&tpmAKs, "tpm-ak", "trust the TPM attestation key in `FILE` (PEM public key, repeatable; e.g. the tpm-ak.pem a TPM server writes), for tpm bundles; exclusive with --tpm-ak-roots; default none")
	tpmAKRoots := flags.String("tpm-ak-roots", "", "PEM `FILE` of roots that certify TPM attestation keys (a cloud vTPM's AK CA), for tpm bundles; default none (tpm bundles need --tpm-ak or this)")
	disclosureFile := flags.String("disclosure", "", "verify a disclosure (acds disclose) instead of a BUNDLE: its bundle, and every entry it shows under the signed commitment; default none")
	var measurements hexList
	flags.Var(&measurements, "measurement", "allow the code hash `HEX` (repeatable): a policy without a manifest, exclusive with --policy; 96 hex digits for sev-snp, sev-snp-sim and tdx, 64 for tpm; default none: this acds binary's hash")
	var notaryKeys fileList
	flags.Var(&notaryKeys, "notary-key", "trust the MPC-TLS notary public key in `FILE` (PEM, as acds notary prints it, or hex or base64; repeatable): for bundles of a server run with an external notary (acds serve --notary); default none beyond the policy's")
	setUsage(flags, help{usage: []string{
		"acds verify BUNDLE|- [--policy FILE [--manifest-key FILE] | --measurement HEX…] [--tpm-ak FILE… | --tpm-ak-roots FILE] [--notary-key FILE…] [--allow-simulated] [--output FILE] [--json] [--html FILE]",
		"acds verify --server https://HOST:PORT [--policy FILE | --measurement HEX…] [--tpm-ak FILE… | --tpm-ak-roots FILE] [--allow-simulated] [--json]",
		"acds verify --disclosure FILE [--policy FILE | --measurement HEX…] [--tpm-ak FILE… | --tpm-ak-roots FILE] [--notary-key FILE…] [--allow-simulated] [--json] [--html FILE]"},
		about: `
Verifies an attestation bundle offline (BUNDLE is a file holding it as base64
or raw CBOR, - for standard input), or with --server a running server's
attested TLS. Nothing is fetched: the trust comes from the policy and the clock.

Defaults: without --policy or --measurement the expected code hash is this acds
binary's (what ` + "`acds measure`" + ` prints; go run, go build and -ldflags=-s -w builds
each have another, so pass the server's with --measurement: its ready line prints
it) and no notary key is trusted (a server with an external notary, acds serve
--notary, needs its key: --notary-key, or the policy's notaryKeys); no simulated enclave is accepted; the output is
not checked; a text report. --html FILE also writes the report page (the one
GET /verify shows: every check and its reason, the evidence chain, the
measurement against the policy, the notary statements, the claims and, with
--output, the output's resources and latest observations, with --disclosure the
disclosed entries) as one HTML file that loads nothing.`,
		exit: `0 valid, 1 invalid (the reasons are printed), 2 usage error,
unreadable input or (with --server) connection error.`})
	args, err := parseArgs(flags, e.args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	usage := func(why string) int {
		fmt.Fprintln(e.stderr, "acds verify: "+why)
		flags.Usage()
		return 2
	}
	switch {
	case *disclosureFile != "" && (*server != "" || *outputFile != "" || len(args) != 0):
		// A disclosure carries its bundle and stands for the output.
		return usage("--disclosure takes no BUNDLE, --output or --server")
	case *disclosureFile != "":
	case *server != "" && len(args) != 0:
		return usage("give a BUNDLE or --server, not both")
	case *server != "" && (*outputFile != "" || *htmlFile != ""):
		return usage("--output and --html check a BUNDLE, not --server")
	case *server == "" && len(args) == 0:
		return usage("no BUNDLE (a file, or - for standard input) and no --server")
	case len(args) > 1:
		return usage(fmt.Sprintf("one BUNDLE at a time; got %d arguments", len(args)))
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "acds verify: "+format+"\n", a...)
		return 2
	}

	if *policyFile != "" && len(measurements) > 0 {
		fmt.Fprintln(e.stderr, "acds verify: --policy and --measurement are exclusive: a manifest, or the code hashes given")
		return 2
	}

	if *manifestKey != "" && *policyFile == "" {
		return fail("--manifest-key needs --policy")
	}
	p, source, err := verify.LoadPolicy(verify.PolicyFiles{
		Manifest:             *policyFile,
		ManifestKey:          *manifestKey,
		Measurements:         measurements,
		TPMAKs:               tpmAKs,
		TPMAKRoots:           *tpmAKRoots,
		UnsafeAllowSimulated: *allowSim,
	}, time.Now)
	switch {
	case errors.Is(err, manifest.ErrKeyRequired):
		return fail("--policy: %s is a signed manifest: give the publisher's public key with --manifest-key", *policyFile)
	case err != nil && *policyFile != "":
		return fail("--policy: %v", err)
	case err != nil:
		return fail("%v", err)
	}
	var notes []string
	if source != "" {
		notes = append(notes, source)
	}
	for _, f := range notaryKeys {
		k, err := manifest.ReadPublicKey(f)
		if err != nil {
			return fail("--notary-key: %v", err)
		}
		p.NotaryKeys = append(p.NotaryKeys, k)
	}
	if len(notaryKeys) > 0 {
		notes = append(notes, fmt.Sprintf("notary keys trusted from --notary-key: %d", len(notaryKeys)))
	}
	selfHash := false
	if *policyFile == "" && len(measurements) == 0 {
		ms, self, err := verify.SelfMeasurements()
		if err != nil {
			return fail("%v", err)
		}
		p.Measurements = ms
		notes = append(notes, "no --policy: expecting this acds binary's code hash "+hex.EncodeToString(self))
		selfHash = true
	}
	if *server != "" {
		ch, err := attested.NewChecker(p, nil)
		if err != nil {
			return fail("%v", err)
		}
		return verifyServer(ctx, e, *server, ch, *asJSON, notes, selfHash)
	}
	v, err := verify.New(p)
	if err != nil {
		return fail("%v", err)
	}

	if *disclosureFile != "" {
		return verifyDisclosure(e, v, *disclosureFile, *htmlFile, *asJSON, notes, selfHash) // disclose.go
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
	if *htmlFile != "" {
		if err := writeReport(*htmlFile, report.Input{Result: res, Bundle: bundle, Output: output, Verifier: v, Notes: notes}); err != nil {
			return fail("--html: %v", err)
		}
	}
	return printReport(e, res, *asJSON, notes, selfHash)
}

// writeReport writes the report page of in to name (mode 0644: a report
// holds what the bundle and output hold, and the caller chose to keep it).
func writeReport(name string, in report.Input) error {
	page, err := report.Render(in)
	if err != nil {
		return err
	}
	return os.WriteFile(name, page, 0o644)
}

// printReport prints a result (as text or as the /v1/verify JSON object) and
// returns the exit code: 0 valid, 1 not.
func printReport(e env, res *verify.Result, asJSON bool, notes []string, selfHash bool) int {
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

// verifyServer is the attested-TLS check of a running server: it connects
// with ch's TLS configuration, which verifies the boot evidence in the
// server's certificate during the handshake (before anything is sent), and
// reports. A TLS server without evidence is not an enclave (exit 1); no
// TLS at all is a connection error (exit 2).
func verifyServer(ctx context.Context, e env, rawURL string, ch *attested.Checker, asJSON bool, notes []string, selfHash bool) int {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		fmt.Fprintf(e.stderr, "acds verify: --server wants https://HOST[:PORT], got %q\n", rawURL)
		return 2
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	d := tls.Dialer{Config: ch.TLSConfig(u.Hostname())}
	conn, err := d.DialContext(ctx, "tcp", addr)
	var res *verify.Result
	var refused *verify.CertificateError
	switch {
	case err == nil:
		res = ch.Result(conn.(*tls.Conn).ConnectionState().PeerCertificates[0])
		conn.Close()
	case errors.As(err, &refused):
		res = refused.Result
	}
	if res == nil {
		fmt.Fprintf(e.stderr, "acds verify: %s: %v\n", addr, err)
		return 2
	}
	notes = append(notes, "attested TLS to "+addr)
	return printReport(e, res, asJSON, notes, selfHash)
}

// printCoverage prints what the claims say a fetched record was
// assembled from: the summary line, every request with its status, pages
// and entries, and the compartment types the portal does not search.
func printCoverage(w io.Writer, line func(k, v string), r *verify.Result, c *acds.Coverage) {
	summary := r.CoverageSummary()
	if summary == "" {
		return
	}
	line("coverage", summary)
	if c == nil {
		return
	}
	for _, q := range c.Requests {
		fmt.Fprintf(w, "    %s  HTTP %d, pages %d, entries %d\n", q.RequestLine, q.Status, q.Pages, q.Entries)
	}
	if len(c.Unsupported) > 0 {
		line("not searchable", strings.Join(c.Unsupported, ", "))
	}
}

// hexList is a repeatable flag of code hashes, checked as they are given.
type hexList []string

// fileList is a repeatable flag of file names.
type fileList []string

func (l *fileList) String() string { return strings.Join(*l, ",") }

func (l *fileList) Set(s string) error {
	if s == "" {
		return fmt.Errorf("empty file name")
	}
	*l = append(*l, s)
	return nil
}

func (h *hexList) String() string { return strings.Join(*h, ",") }

func (h *hexList) Set(s string) error {
	if _, err := verify.ParseMeasurements(s); err != nil {
		return err
	}
	*h = append(*h, s)
	return nil
}

// readBundle reads BUNDLE ("-" is stdin) as attestation.ReadBundle reads
// it: raw CBOR or base64.
func readBundle(name string, stdin io.Reader) ([]byte, error) {
	data, err := readArg(name, stdin, attestation.MaxBundleTextSize)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	b, err := attestation.ReadBundle(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
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
	printClaimsV2(line, d) // disclose.go
	printCoverage(w, line, r, d.Coverage)
	for _, n := range notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	for _, reason := range d.Reasons {
		fmt.Fprintf(w, "  - %s\n", reason)
	}
}

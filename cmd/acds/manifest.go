package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/acds-project/acds/attestation/manifest"
)

// runManifest makes and checks signed reference-value manifests.
//
//	acds manifest sign   --key KEY --in DESCRIPTION.json --out SIGNED [--pub-out PUBKEY]
//	acds manifest verify --key PUBKEY --in SIGNED [--json]
//
// sign reads a JSON manifest description (see manifest.Description), signs
// it with the Ed25519 private key in KEY (PEM PKCS #8; created with mode 0600
// when the file does not exist, and never overwritten) and writes the
// COSE_Sign1 manifest to SIGNED ("-" for standard output); it prints the
// publisher's public key (PEM) on standard error so it can be published,
// and with --pub-out also writes it to a file that verify --key reads.
// verify checks SIGNED against the public key in PUBKEY (PEM, hex or base64)
// and the current time, and prints the manifest. Exit 0 on success, 1 when
// the manifest does not verify, 2 on usage errors or unreadable files.
func runManifest(ctx context.Context, e env) int {
	usageTo := func(w io.Writer) {
		fmt.Fprintln(w, "usage: acds manifest sign --key KEY --in DESCRIPTION.json --out SIGNED [--pub-out PUBKEY]")
		fmt.Fprintln(w, "       acds manifest verify --key PUBKEY --in SIGNED [--json]")
		fmt.Fprintln(w, "\nrun `acds manifest sign -h` or `acds manifest verify -h` for each one's flags")
	}
	usage := func() { usageTo(e.stderr) }
	if len(e.args) == 0 {
		usage()
		return 2
	}
	switch e.args[0] {
	case "sign":
		return manifestSign(e)
	case "verify":
		return manifestVerify(e)
	case "-h", "--help", "help":
		usageTo(e.stdout)
		return 0
	default:
		fmt.Fprintf(e.stderr, "acds manifest: unknown subcommand %q\n", e.args[0])
		usage()
		return 2
	}
}

func manifestSign(e env) int {
	flags := flag.NewFlagSet("acds manifest sign", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	keyFile := flags.String("key", "", "Ed25519 private key file (PEM PKCS #8), created with mode 0600 if missing")
	in := flags.String("in", "", "JSON manifest description")
	out := flags.String("out", "", `file for the signed manifest ("-" for standard output)`)
	pubOut := flags.String("pub-out", "", "also write the publisher's public key (PEM) to `FILE`, the form acds manifest verify --key and acds verify --manifest-key read; default none: it is printed on standard error only")
	setUsage(flags, help{usage: []string{"acds manifest sign --key KEY --in DESCRIPTION.json --out SIGNED [--pub-out PUBKEY]"},
		about: `
Signs a JSON manifest description (issuer, notBefore, notAfter, profiles with
their measurements and minimum TCB, notaryKeys) with the Ed25519 private key in
KEY (PEM PKCS #8; created with mode 0600 when missing, never overwritten) and
writes the COSE_Sign1 manifest to SIGNED ("-" for standard output). The
publisher's public key (PEM) is printed on standard error for publishing.`,
		exit: "0 signed, 2 usage error, an unreadable or invalid description or key."})
	args, err := parseArgs(flags, e.args[1:], e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if *keyFile == "" || *in == "" || *out == "" || len(args) != 0 {
		fmt.Fprintln(e.stderr, "acds manifest sign: --key, --in and --out are required")
		return 2
	}
	desc, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds manifest sign: %v\n", err)
		return 2
	}
	m, err := manifest.ParseDescription(desc)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds manifest sign: %s: %v\n", *in, err)
		return 2
	}
	key, created, err := manifest.LoadOrCreateKey(*keyFile)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds manifest sign: %v\n", err)
		return 2
	}
	if created {
		fmt.Fprintf(e.stderr, "acds manifest sign: created a new signing key in %s\n", *keyFile)
	}
	signed, err := manifest.Sign(nil, m, key)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds manifest sign: %v\n", err)
		return 1
	}
	if *out == "-" {
		_, err = e.stdout.Write(signed)
	} else {
		err = os.WriteFile(*out, signed, 0o644)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "acds manifest sign: %v\n", err)
		return 1
	}
	pub := manifest.MarshalPublicKey(key.Public().(ed25519.PublicKey))
	if *pubOut != "" {
		if err := os.WriteFile(*pubOut, pub, 0o644); err != nil {
			fmt.Fprintf(e.stderr, "acds manifest sign: --pub-out: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "acds manifest sign: signed %d profile(s) for %s; publisher key:\n", len(m.Profiles), m.Issuer)
	e.stderr.Write(pub)
	if *pubOut != "" {
		fmt.Fprintf(e.stderr, "acds manifest sign: publisher key written to %s\n", *pubOut)
	}
	return 0
}

func manifestVerify(e env) int {
	flags := flag.NewFlagSet("acds manifest verify", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	keyFile := flags.String("key", "", "the publisher's Ed25519 public key file (PEM, hex or base64)")
	in := flags.String("in", "", `signed manifest ("-" for standard input)`)
	asJSON := flags.Bool("json", false, "print the manifest as a JSON description")
	setUsage(flags, help{usage: []string{"acds manifest verify --key PUBKEY --in SIGNED [--json]"},
		about: `
Checks the signed manifest SIGNED ("-" for standard input) against the
publisher's public key in PUBKEY (PEM, hex or base64) and the current time, and
prints the manifest.`,
		exit: "0 valid, 1 the manifest does not verify, 2 usage error or unreadable files."})
	args, err := parseArgs(flags, e.args[1:], e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if *keyFile == "" || *in == "" || len(args) != 0 {
		fmt.Fprintln(e.stderr, "acds manifest verify: --key and --in are required")
		return 2
	}
	pub, err := manifest.ReadPublicKey(*keyFile)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds manifest verify: %v\n", err)
		return 2
	}
	signed, err := readArg(*in, e.stdin, manifest.MaxSize)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds manifest verify: %v\n", err)
		return 2
	}
	m, err := manifest.Verify(signed, pub, time.Now())
	if err != nil {
		fmt.Fprintf(e.stderr, "acds manifest verify: %v\n", err)
		return 1
	}
	d := m.Description()
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(d)
		return 0
	}
	fmt.Fprintf(e.stdout, "VALID manifest from %s, %s to %s\n", d.Issuer, d.NotBefore.Format(time.RFC3339), d.NotAfter.Format(time.RFC3339))
	names := make([]string, 0, len(d.Profiles))
	for n := range d.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := d.Profiles[n]
		fmt.Fprintf(e.stdout, "  %s:\n", n)
		for _, h := range p.Measurements {
			fmt.Fprintf(e.stdout, "    measurement %s\n", h)
		}
		if t := p.MinimumTCB; t != nil {
			fmt.Fprintf(e.stdout, "    minimum TCB bootloader=%d tee=%d snp=%d microcode=%d\n", t.Bootloader, t.TEE, t.SNP, t.Microcode)
		}
	}
	for _, k := range d.NotaryKeys {
		fmt.Fprintf(e.stdout, "  notary key %s\n", k)
	}
	return 0
}

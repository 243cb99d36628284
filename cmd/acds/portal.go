package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// runPortal runs the demo clinical portal over HTTPS until ctx ends.
//
//	acds portal [--addr 127.0.0.1:8443] [--ca-out ca.pem] [--patients 25] [--seed 1] [fault flags]
//
// It writes the portal's CA certificate to --ca-out (or prints it when
// --ca-out is empty), prints the FHIR base URL, the demo credentials, the
// SMART client registration and the patients, and then one line with the
// listen address once ready. The fault flags make the portal misbehave
// for testing clients. Exit 0 after a clean shutdown, 1 on a runtime
// error, 2 on a usage error.
func runPortal(ctx context.Context, e env) int {
	flags := flag.NewFlagSet("acds portal", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	addr := flags.String("addr", "127.0.0.1:8443", "listen address (host:port)")
	caOut := flags.String("ca-out", "", "file to write the portal's CA certificate (PEM) to; empty prints it")
	patients := flags.Int("patients", 25, "number of synthetic patients (1..10000)")
	seed := flags.Uint64("seed", 1, "seed of the synthetic patients; the same seed gives the same records")
	hosts := flags.String("hosts", "", "comma-separated extra DNS names for the server certificate (localhost is always in it)")
	var f demoportal.Failures
	flags.BoolVar(&f.RejectPassword, "fail-password", false, "fault: refuse every login as a wrong password")
	flags.BoolVar(&f.Locked, "fail-locked", false, "fault: refuse every login as a locked account")
	flags.BoolVar(&f.MFA, "fail-mfa", false, "fault: ask every login for a second factor")
	flags.IntVar(&f.RateLimited, "fail-429", 0, "fault: answer the first N FHIR requests with 429 and Retry-After")
	flags.DurationVar(&f.RetryAfter, "retry-after", 0, "Retry-After of the 429 fault (default 1s)")
	flags.IntVar(&f.ServerErrors, "fail-5xx", 0, "fault: answer the first N FHIR requests with 503 (-1: all)")
	flags.DurationVar(&f.Slow, "slow", 0, "fault: delay every FHIR answer by this long")
	flags.BoolVar(&f.TruncatePages, "truncate-pages", false, "fault: cut every search page in half")
	flags.BoolVar(&f.NoEverything, "no-everything", false, "fault: no Patient/$everything (clients must fall back to searches)")
	var pages demoportal.Pages
	flags.StringVar(&pages.Style, "login-style", "", "draw the SMART login and consent pages as `PROVIDER` does: oidc-provider or dex (default: the demo's own)")
	flags.BoolVar(&pages.Chooser, "chooser", false, "put a sign-in chooser (several identity providers, one password login) before the login")
	setUsage(flags, help{usage: []string{"acds portal [--addr HOST:PORT] [--ca-out FILE] [--patients N] [--seed N] [--login-style PROVIDER] [--chooser] [fault flags]"},
		about: `
Runs the demo clinical portal over HTTPS: a FHIR R4 server with synthetic
patients, HTTP Basic, SMART password and SMART form logins, for trying
fetch-and-attest without a real portal. Writes its CA certificate (--ca-out, for
acds serve --portal-ca), prints the FHIR base URL, the demo credentials and the
patients, then one line with the listen address once ready. The fault flags
make it misbehave, for testing clients.`,
		exit: "0 after a clean shutdown, 1 runtime error, 2 usage error."})
	args, err := parseArgs(flags, e.args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if len(args) != 0 {
		fmt.Fprintf(e.stderr, "acds portal: unexpected argument %q\n", args[0])
		return 2
	}
	if *patients < 1 || *patients > 10000 {
		fmt.Fprintf(e.stderr, "acds portal: --patients %d out of range 1..10000\n", *patients)
		return 2
	}
	if s := pages.Style; s != demoportal.StyleDemo && s != demoportal.StyleOIDCProvider && s != demoportal.StyleDex {
		fmt.Fprintf(e.stderr, "acds portal: --login-style %q: want %s or %s\n", s, demoportal.StyleOIDCProvider, demoportal.StyleDex)
		return 2
	}
	var extra []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			extra = append(extra, h)
		}
	}
	d, err := demoportal.New(demoportal.Options{Seed: *seed, Patients: *patients, Hosts: extra, Failures: f, Pages: pages})
	if err != nil {
		fmt.Fprintf(e.stderr, "acds portal: %v\n", err)
		return 1
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds portal: %v\n", err)
		return 1
	}
	if *caOut != "" {
		if err := os.WriteFile(*caOut, d.CACertPEM(), 0o644); err != nil {
			l.Close()
			fmt.Fprintf(e.stderr, "acds portal: --ca-out: %v\n", err)
			return 1
		}
		fmt.Fprintf(e.stdout, "CA certificate: %s\n", *caOut)
	} else {
		fmt.Fprintf(e.stdout, "%s", d.CACertPEM())
	}
	base := portalBaseURL(l.Addr().(*net.TCPAddr), *addr)
	fmt.Fprintf(e.stdout, "FHIR base URL: %s\n", base)
	fmt.Fprintf(e.stdout, "demo credentials: username %q password %q (systemType fhir-basic, smart-password, smart-form or demo)\n",
		demoportal.Username, demoportal.Password)
	fmt.Fprintf(e.stdout, "SMART client: client_id %q redirect_uri %q\n", portal.DemoClientID, portal.DemoRedirectURI)
	for _, p := range d.Patients() {
		fmt.Fprintf(e.stdout, "patient %s  %-20s %5d resources %9d bytes\n", p.ID, p.Name, p.Resources, p.Bytes)
	}
	fmt.Fprintf(e.stdout, "acds portal listening on %s\n", l.Addr())
	errc := make(chan error, 1)
	go func() { errc <- d.Serve(l) }()
	select {
	case <-ctx.Done():
		d.Close()
		<-errc
		return 0
	case err := <-errc:
		d.Close()
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(e.stderr, "acds portal: %v\n", err)
			return 1
		}
		return 0
	}
}

// portalBaseURL is the FHIR base URL for a listener: loopback and
// unspecified hosts become "localhost", which the certificate names and
// which a notary can put in SNI; other hosts stay as given.
func portalBaseURL(a *net.TCPAddr, requested string) string {
	host, _, _ := net.SplitHostPort(requested)
	if ip := net.ParseIP(host); host == "" || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		host = "localhost"
	}
	return fmt.Sprintf("https://%s/fhir", net.JoinHostPort(host, fmt.Sprint(a.Port)))
}

package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/portal"
)

// runNotary runs a standalone recording notary until ctx ends.
//
//	acds notary [--addr 127.0.0.1:7047] [--key notary.key] [--portal-ca ca.pem]
//
// It prints the notary's public key (PEM) and then one line with the
// listen address once ready, and logs one line per ended session to
// stderr (id, host, address, byte counts, outcome; never secrets). Exit 0 after a clean shutdown, 1 on a
// runtime error, 2 on a usage error.
func runNotary(ctx context.Context, e env) int {
	flags := flag.NewFlagSet("acds notary", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	addr := flags.String("addr", "127.0.0.1:7047", "listen address (host:port)")
	keyFile := flags.String("key", "notary.key", "Ed25519 signing key file (PEM PKCS #8), created with mode 0600 if missing")
	portalCA := flags.String("portal-ca", "", "PEM file of extra roots trusted for portal certificates")
	allowPrivate := flags.Bool("allow-private-targets", false, "dial targets on loopback, private, link-local and metadata addresses (development only)")
	setUsage(flags, help{usage: []string{"acds notary [--addr HOST:PORT] [--key FILE] [--portal-ca FILE] [--allow-private-targets]"},
		about: `
Runs a standalone MPC-TLS recording notary: an HTTP CONNECT proxy that dials
portals itself, records the TLS session, checks the server's identity and signs
a statement of it. Prints its public key (PEM; give it to acds serve --notary-key)
and one line with the listen address once ready. Never sees response plaintext.

It refuses targets that resolve to loopback, private, link-local, metadata and
other non-public addresses (the same rule as acds serve's portals), without
naming the address in its answer; --allow-private-targets lifts that for
development. It reports the address it dialled, which acds serve checks again.`,
		exit: "0 after a clean shutdown, 1 runtime error, 2 usage error."})
	args, err := parseArgs(flags, e.args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if len(args) != 0 {
		fmt.Fprintf(e.stderr, "acds notary: unexpected argument %q\n", args[0])
		return 2
	}
	key, created, err := notary.LoadOrCreateKey(*keyFile)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds notary: %v\n", err)
		return 1
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if *portalCA != "" {
		pemBytes, err := os.ReadFile(*portalCA)
		if err != nil {
			fmt.Fprintf(e.stderr, "acds notary: --portal-ca: %v\n", err)
			return 1
		}
		if !roots.AppendCertsFromPEM(pemBytes) {
			fmt.Fprintf(e.stderr, "acds notary: --portal-ca: no certificates in %s\n", *portalCA)
			return 1
		}
	}
	logw := &notaryLogWriter{w: e.stderr}
	// The one SSRF rule, portal.Guard, decides which addresses may be
	// dialled: package notary has none of its own (it imports nothing of
	// ACDS), so the command injects it.
	guard := portal.Guard{AllowPrivate: *allowPrivate}
	cfg := notary.Config{Key: key, Roots: roots, AllowAddr: guard.AllowAddrPort}
	if e.resolver != nil {
		cfg.Resolver = e.resolver
	}
	cfg.SessionDone = func(i notary.SessionInfo) {
		outcome := "signed"
		if !i.Signed {
			outcome = "not signed: " + i.Err.Error()
		}
		fmt.Fprintf(logw, "acds notary: session %s %s (%s) %d bytes up, %d down: %s\n",
			i.ID, i.Host, i.Address, i.ClientBytes, i.ServerBytes, outcome)
	}
	n, err := notary.New(cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds notary: %v\n", err)
		return 1
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "acds notary: %v\n", err)
		return 1
	}
	pub, err := notary.MarshalPublicKey(n.PublicKey())
	if err != nil {
		l.Close()
		fmt.Fprintf(e.stderr, "acds notary: %v\n", err)
		return 1
	}
	if created {
		fmt.Fprintf(e.stderr, "acds notary: created a new signing key in %s\n", *keyFile)
	}
	fmt.Fprintf(e.stdout, "%s", pub)
	fmt.Fprintf(e.stdout, "acds notary listening on %s\n", l.Addr())
	errc := make(chan error, 1)
	go func() { errc <- n.Serve(l) }()
	select {
	case <-ctx.Done():
		n.Close()
		<-errc
		return 0
	case err := <-errc:
		n.Close()
		if err != nil {
			fmt.Fprintf(e.stderr, "acds notary: %v\n", err)
			return 1
		}
		return 0
	}
}

// notaryLogWriter serializes writes from concurrent sessions.
type notaryLogWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *notaryLogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

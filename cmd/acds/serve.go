package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/attestedtls"
	"github.com/acds-project/acds/internal/portal"
	"github.com/acds-project/acds/internal/store"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/verify"
)

// serveFlags are the flags of `acds serve` (DESIGN §8; stable API).
type serveFlags struct {
	addr                string
	dataDir             string
	store               string
	notary              string
	notaryKey           string
	portalCA            string
	allowPrivatePortals bool
	workers             int
	rateLimit           float64
	tls                 bool
	tlsCACert           string
	tlsCAKey            string
	logLevel            string
}

func parseServeFlags(e env) (*serveFlags, error) {
	fs := flag.NewFlagSet("acds serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	f := &serveFlags{}
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address (host:port; port 0 picks a free port)")
	fs.StringVar(&f.dataDir, "data-dir", "./acds-data", "directory for the SQLite store and the simulated enclave's keys (created 0700)")
	fs.StringVar(&f.store, "store", "", "store: empty or \"sqlite\" for <data-dir>/acds.db, \"sqlite:PATH\", or a postgres://… DSN shared by replicas")
	fs.StringVar(&f.notary, "notary", "", "MPC-TLS notary: empty for the in-process notary, or host:port of an `acds notary`")
	fs.StringVar(&f.notaryKey, "notary-key", "", "file with the trusted public key of the external notary (required with --notary host:port)")
	fs.StringVar(&f.portalCA, "portal-ca", "", "PEM file of extra root certificates trusted for portals")
	fs.BoolVar(&f.allowPrivatePortals, "allow-private-portals", false, "allow portals on loopback, private and link-local addresses (development only)")
	fs.IntVar(&f.workers, "workers", 2*runtime.NumCPU(), "requests processed concurrently")
	fs.Float64Var(&f.rateLimit, "rate-limit", server.DefaultRateLimit, "requests per second per token; 0 turns the limit off (load tests)")
	fs.BoolVar(&f.tls, "tls", false, "serve HTTPS with the enclave's attested TLS key")
	fs.StringVar(&f.tlsCACert, "tls-ca-cert", "", "with --tls: PEM file of an operator CA certificate (then its chain) that issues the attested certificate instead of self-signing it")
	fs.StringVar(&f.tlsCAKey, "tls-ca-key", "", "with --tls: PEM file of the operator CA's private key (not group/world-readable; needs --tls-ca-cert)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: acds serve [flags]")
		fmt.Fprintln(e.stderr)
		fmt.Fprintln(e.stderr, "Serves the ACDS v1 API, prints one line with the listen address once ready,")
		fmt.Fprintln(e.stderr, "and drains in-flight requests on SIGTERM or interrupt.")
		fmt.Fprintln(e.stderr)
		fmt.Fprintln(e.stderr, "With --tls the certificate carries the enclave's boot evidence and is")
		fmt.Fprintln(e.stderr, "self-signed, or issued by an operator CA with --tls-ca-cert and --tls-ca-key;")
		fmt.Fprintln(e.stderr, "clients verify the evidence either way (acds verify --server).")
		fmt.Fprintln(e.stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(e.args); err != nil {
		return nil, err
	}
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if _, _, err := net.SplitHostPort(f.addr); err != nil {
		return nil, fmt.Errorf("--addr %q: %w", f.addr, err)
	}
	if f.workers < 1 {
		return nil, fmt.Errorf("--workers must be at least 1")
	}
	if f.rateLimit < 0 {
		return nil, fmt.Errorf("--rate-limit must not be negative")
	}
	if _, err := parseLogLevel(f.logLevel); err != nil {
		return nil, err
	}
	switch {
	case f.store == "", f.store == "sqlite", strings.HasPrefix(f.store, "sqlite:"),
		strings.HasPrefix(f.store, "postgres://"), strings.HasPrefix(f.store, "postgresql://"):
	default:
		return nil, fmt.Errorf("--store must be empty, \"sqlite\", \"sqlite:PATH\" or a postgres:// DSN")
	}
	if f.notary != "" {
		if _, _, err := net.SplitHostPort(f.notary); err != nil {
			return nil, fmt.Errorf("--notary %q: want host:port: %w", f.notary, err)
		}
		if f.notaryKey == "" {
			return nil, fmt.Errorf("--notary needs --notary-key (the external notary's public key file)")
		}
	}
	if f.notaryKey != "" {
		if _, err := os.Stat(f.notaryKey); err != nil {
			return nil, fmt.Errorf("--notary-key: %w", err)
		}
	}
	if f.tlsCACert != "" || f.tlsCAKey != "" {
		if _, err := loadTLSIssuer(f); err != nil {
			return nil, err
		}
	}
	if f.portalCA != "" {
		pem, err := os.ReadFile(f.portalCA)
		if err != nil {
			return nil, fmt.Errorf("--portal-ca: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--portal-ca %s: no PEM certificate in it", f.portalCA)
		}
	}
	return f, nil
}

func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// runServe runs the API server until ctx ends (SIGTERM or interrupt), then
// drains: it stops accepting connections, lets in-flight HTTP requests and
// worker attempts finish (up to 30 s; unfinished attempts are re-claimed
// after a restart), and closes the store. Exit codes: 0 after a clean
// drain, 1 on a runtime failure, 2 on bad flags.
func runServe(ctx context.Context, e env) int {
	f, err := parseServeFlags(e)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "acds serve: %v\n", err)
		return 2
	}
	level, _ := parseLogLevel(f.logLevel)
	log := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(ctx, f, e.stdout, log, nil); err != nil {
		log.Error("acds serve failed", "err", err)
		fmt.Fprintf(e.stderr, "acds serve: %v\n", err)
		return 1
	}
	return 0
}

// serve runs the server for f. tune, when not nil, adjusts the server
// configuration before start (tests shorten the lease with it).
func serve(ctx context.Context, f *serveFlags, stdout io.Writer, log *slog.Logger, tune func(*server.Config)) error {
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	st, where, err := openStore(ctx, f)
	if err != nil {
		return err
	}
	defer st.Close()

	encl, err := sim.Open(ctx, filepath.Join(f.dataDir, "enclave"), attestation.Options{TLS: f.tls})
	if err != nil {
		return fmt.Errorf("enclave: %w", err)
	}
	deidKey, err := deidentificationKey(encl, filepath.Join(f.dataDir, "deidentify.key.sealed"))
	if err != nil {
		return err
	}
	fetcher, notaryKeys, inProcess, closeNotary, err := portalFetcher(f, log)
	if err != nil {
		return err
	}
	defer closeNotary()
	ver, err := newVerifier(encl, notaryKeys)
	if err != nil {
		return err
	}
	cfg := server.Config{
		Store:               st,
		Pipeline:            fhirPipeline{key: deidKey},
		Enclave:             enclaveSeam{e: encl, notaryKey: inProcess},
		Verifier:            ver,
		Fetcher:             fetcher,
		Logger:              log,
		Workers:             f.workers,
		RateLimit:           f.rateLimit,
		AllowPrivatePortals: f.allowPrivatePortals,
	}
	if f.rateLimit == 0 {
		cfg.RateLimit = -1
	}
	if tune != nil {
		tune(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	log.Info("starting", "version", acds.Version, "store", where, "enclave", encl.Profile(),
		"measurement", hex.EncodeToString(encl.Measurement()), "workers", f.workers)

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		_ = srv.Close(context.Background())
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if f.tls {
		// The certificate carries the boot evidence and is reissued for the
		// same enclave key before it expires, so attested clients keep
		// accepting a long-running server.
		// With --tls-ca-cert/--tls-ca-key an operator CA issues them.
		hosts, _ := attestedtls.ListenHosts(f.addr)
		issuer, err := loadTLSIssuer(f)
		if err != nil {
			_ = ln.Close()
			_ = srv.Close(context.Background())
			return err
		}
		certs, err := attestedtls.NewCertificates(encl, attestedtls.Options{Hosts: hosts, Issuer: issuer})
		if err != nil {
			_ = ln.Close()
			_ = srv.Close(context.Background())
			return err
		}
		if issuer != nil {
			log.Info("attested TLS certificates issued by an operator CA", "ca", issuer.Certificate.Subject.String())
		}
		hs.TLSConfig = certs.TLSConfig()
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "acds %s serving on %s://%s\n", acds.Version, scheme, ln.Addr())

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining in-flight requests")
	case serveErr = <-errc:
	}
	drain, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(drain); err != nil {
		log.Warn("HTTP shutdown incomplete", "err", err)
	}
	if err := srv.Close(drain); err != nil {
		log.Warn("workers did not finish in time; their requests will be re-claimed", "err", err)
	}
	log.Info("stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// loadTLSIssuer returns the operator CA of --tls-ca-cert and --tls-ca-key,
// or nil when neither is set. Both are needed, only with --tls, and the key
// file must not be readable by group or others. Errors name the files,
// never the key's content.
func loadTLSIssuer(f *serveFlags) (*attestation.Issuer, error) {
	switch {
	case f.tlsCACert == "" && f.tlsCAKey == "":
		return nil, nil
	case f.tlsCACert == "" || f.tlsCAKey == "":
		return nil, errors.New("--tls-ca-cert and --tls-ca-key go together")
	case !f.tls:
		return nil, errors.New("--tls-ca-cert and --tls-ca-key need --tls")
	}
	fi, err := os.Stat(f.tlsCAKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca-key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--tls-ca-key %s: mode %04o lets group or others read it; chmod 600 it", f.tlsCAKey, fi.Mode().Perm())
	}
	certPEM, err := readLimited(f.tlsCACert, attestation.MaxIssuerPEMSize)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca-cert: %w", err)
	}
	keyPEM, err := readLimited(f.tlsCAKey, attestation.MaxIssuerPEMSize)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca-key: %w", err)
	}
	ca, err := attestation.ParseIssuer(certPEM, keyPEM)
	clear(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca-cert %s, --tls-ca-key %s: %w", f.tlsCACert, f.tlsCAKey, err)
	}
	if err := ca.Check(time.Now()); err != nil {
		return nil, fmt.Errorf("--tls-ca-cert %s: %w", f.tlsCACert, err)
	}
	return ca, nil
}

// readLimited reads a file of at most limit bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// portalFetcher builds the fetch-and-attest path: the portal connectors
// (internal/portal) behind the SSRF guard, fetching through the MPC-TLS
// prover and a notary — the in-process one (listening on loopback, its key
// kept in the data dir) or the external one of --notary/--notary-key. It
// returns the fetcher, the notary keys to trust, the in-process notary's
// key (nil for an external notary) and a function that stops the notary.
func portalFetcher(f *serveFlags, log *slog.Logger) (server.Fetcher, []ed25519.PublicKey, ed25519.PublicKey, func(), error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if f.portalCA != "" {
		pemBytes, err := os.ReadFile(f.portalCA)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("--portal-ca: %w", err)
		}
		if !roots.AppendCertsFromPEM(pemBytes) {
			return nil, nil, nil, nil, fmt.Errorf("--portal-ca %s: no PEM certificate in it", f.portalCA)
		}
	}
	guard := portal.Guard{AllowPrivate: f.allowPrivatePortals}
	var (
		addr      string
		keys      []ed25519.PublicKey
		inProcess ed25519.PublicKey
		stop      = func() {}
	)
	if f.notary == "" {
		key, created, err := loadOrCreateNotaryKey(filepath.Join(f.dataDir, "notary.key"))
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("in-process notary: %w", err)
		}
		// The notary resolves and dials the portal itself: it applies the
		// same address guard as the connectors.
		n, err := notary.New(notary.Config{Key: key, Roots: roots, AllowAddr: guard.AllowAddrPort})
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("in-process notary: %w", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("in-process notary: %w", err)
		}
		go func() { _ = n.Serve(ln) }()
		stop = func() { _ = n.Close() }
		addr, inProcess = ln.Addr().String(), n.PublicKey()
		keys = []ed25519.PublicKey{inProcess}
		log.Info("in-process notary started", "addr", addr, "key_created", created)
	} else {
		b, err := os.ReadFile(f.notaryKey)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("--notary-key: %w", err)
		}
		pub, err := notary.ParsePublicKey(b)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("--notary-key %s: %w", f.notaryKey, err)
		}
		addr, keys = f.notary, []ed25519.PublicKey{pub}
		log.Info("using an external notary", "addr", addr)
	}
	pf := &portal.Fetcher{
		Connector:    portal.Connector{Guard: guard},
		NewTransport: portal.Notarized{Notary: addr, NotaryKeys: keys, TLSConfig: &tls.Config{RootCAs: roots}}.Factory(),
	}
	return fetcherSeam{pf}, keys, inProcess, stop, nil
}

// fetcherSeam is the server.Fetcher of package portal.
type fetcherSeam struct{ f *portal.Fetcher }

func (s fetcherSeam) Fetch(ctx context.Context, r server.FetchRequest) (*server.Fetched, error) {
	res, err := s.f.Fetch(ctx, portal.Request{SystemType: r.SystemType, PortalURL: r.PortalURL, RecordID: r.RecordID,
		Credentials: portal.Credentials{Username: r.Credentials.Username, Password: r.Credentials.Password}})
	if err != nil {
		// portal errors never contain the credentials; the server redacts again.
		return nil, &server.FetchError{Code: portal.ProblemCode(err), Detail: err.Error()}
	}
	return &server.Fetched{FHIR: res.FHIR, Host: res.Host, RequestLine: res.RequestLine, NotaryStatements: res.NotaryStatements}, nil
}

func openStore(ctx context.Context, f *serveFlags) (store.Store, string, error) {
	switch {
	case strings.HasPrefix(f.store, "postgres://"), strings.HasPrefix(f.store, "postgresql://"):
		st, err := store.OpenPostgres(ctx, f.store)
		if err != nil {
			return nil, "", fmt.Errorf("store: %w", err)
		}
		return st, "postgres", nil
	default:
		path := filepath.Join(f.dataDir, "acds.db")
		if p, ok := strings.CutPrefix(f.store, "sqlite:"); ok {
			path = p
		}
		st, err := store.OpenSQLite(ctx, path)
		if err != nil {
			return nil, "", fmt.Errorf("store: %w", err)
		}
		return st, "sqlite:" + path, nil
	}
}

// deidentificationKey returns the 32-byte HMAC key for de-identification
// pseudonyms. It is made once per installation and kept in path sealed by
// the enclave, so the same installation pseudonymises consistently and the
// key is never at rest in the clear.
func deidentificationKey(e *attestation.Enclave, path string) ([]byte, error) {
	const ad = "acds/v1/deidentification-key"
	if sealed, err := os.ReadFile(path); err == nil {
		key, err := e.Open(sealed, []byte(ad))
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
	if err := os.WriteFile(path, sealed, 0o600); err != nil {
		return nil, fmt.Errorf("de-identification key: %w", err)
	}
	return key, nil
}

// fhirPipeline is the server.Pipeline of package fhir.
type fhirPipeline struct{ key []byte }

func (p fhirPipeline) Check(ctx context.Context, input []byte) error {
	// fhir.Check accepts exactly what fhir.Process will, and flags
	// content of other FHIR versions as not R4.
	err := fhir.Check(input, fhir.Options{})
	var inv *fhir.InvalidError
	if errors.As(err, &inv) {
		return invalidFHIR(inv)
	}
	return err
}

func (p fhirPipeline) Process(ctx context.Context, input []byte, o server.ProcessOptions) (*server.Output, error) {
	out, err := fhir.Process(input, fhir.Options{Format: o.Format, Source: o.Source, Measurement: o.Measurement, Now: o.Now, DeidentKey: p.key})
	var inv *fhir.InvalidError
	if errors.As(err, &inv) {
		return nil, invalidFHIR(inv)
	}
	if err != nil {
		return nil, err
	}
	return &server.Output{JSON: out.JSON, Digest: out.Digest}, nil
}

func invalidFHIR(e *fhir.InvalidError) error {
	oo, err := e.Outcome.MarshalJSON()
	if err != nil {
		oo = nil
	}
	n := e.Outcome.ErrorCount()
	detail := fmt.Sprintf("%d errors", n)
	if n == 1 {
		detail = "1 error"
	}
	if e.NotR4 {
		detail += " (the content is not FHIR R4)"
	}
	return &server.InvalidFHIRError{Detail: detail, OperationOutcome: oo}
}

// enclaveSeam is the server.Enclave of an attestation.Enclave. notaryKey,
// when set, is the in-process notary's key, named in the claims of
// mpc-tls outputs (verifiers trust it only when their policy says so).
type enclaveSeam struct {
	e         *attestation.Enclave
	notaryKey ed25519.PublicKey
}

func (s enclaveSeam) Profile() string     { return s.e.Profile() }
func (s enclaveSeam) Measurement() string { return hex.EncodeToString(s.e.Measurement()) }
func (s enclaveSeam) Seal(p, ad []byte) ([]byte, error) {
	return s.e.Seal(p, ad)
}
func (s enclaveSeam) Unseal(c, ad []byte) ([]byte, error) { return s.e.Open(c, ad) }

func (s enclaveSeam) Attest(ctx context.Context, c server.Claims) ([]byte, error) {
	claims := attestation.Claims{RequestID: c.RequestID, OutputFormat: c.OutputFormat, OutputDigest: c.OutputDigest,
		IssuedAt: c.IssuedAt, Source: attestation.Source{Kind: c.Source, InputDigest: c.InputDigest}}
	for range c.NotaryStatements {
		claims.Source.Sessions = append(claims.Source.Sessions, attestation.Session{RequestLine: c.RequestLine, Host: c.Host})
	}
	if c.Source == acds.SourceMPCTLS && len(s.notaryKey) != 0 {
		claims.NotaryKey = s.notaryKey
	}
	return s.e.Attest(ctx, claims, c.NotaryStatements)
}

func (s enclaveSeam) BootEvidence() acds.Attestation {
	b := s.e.BootEvidence()
	a := acds.Attestation{Profile: b.Profile, Measurement: hex.EncodeToString(s.e.Measurement()),
		Evidence: b.Evidence, Certificates: [][]byte{}, SigningKey: b.SigningKey, TLSKey: b.TLSKey, BootNonce: b.Nonce,
		Boot: s.e.MarshalBootEvidence()}
	if ev, err := sevsnp.ParseEvidence(b.Evidence); err == nil {
		for _, c := range [][]byte{ev.VCEK, ev.ASK, ev.ARK} {
			if len(c) > 0 {
				a.Certificates = append(a.Certificates, c)
			}
		}
	}
	return a
}

// verifierSeam is the server.Verifier of package verify, trusting this
// server's own enclave (its measurement and, for the simulated profile,
// its installation's root). For trust that does not depend on the server,
// verify offline with `acds verify`.
type verifierSeam struct{ v *verify.Verifier }

func newVerifier(e *attestation.Enclave, notaryKeys []ed25519.PublicKey) (verifierSeam, error) {
	p, err := verify.TrustEnclave(verify.Policy{NotaryKeys: notaryKeys}, e.BootEvidence(), e.Measurement())
	if err != nil {
		return verifierSeam{}, fmt.Errorf("verifier policy: %w", err)
	}
	return verifierSeam{verify.New(p)}, nil
}

func (s verifierSeam) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
	var (
		r   *verify.Result
		err error
	)
	if output != nil {
		r, err = s.v.VerifyOutput(bundle, output)
	} else {
		r, err = s.v.Verify(bundle)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", server.ErrMalformedBundle, err)
	}
	resp := r.Response()
	return &resp, nil
}

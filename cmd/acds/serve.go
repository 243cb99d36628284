package main

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/internal/serving/attestedtls"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/service"
)

// serveFlags are the flags of `acds serve` (DESIGN §8; stable API).
type serveFlags struct {
	tuneGC              bool // not a flag: runServe sets it unless GOGC is set
	addr                string
	dataDir             string
	store               string
	notary              string
	notaryKey           string
	portalCA            string
	allowPrivatePortals bool
	registrations       string
	workers             int
	rateLimit           float64
	verifyRateLimit     float64
	retention           time.Duration
	maxQueue            int
	tls                 bool
	tlsCACert           string
	tlsCAKey            string
	logLevel            string
	enclave             string
	tpmDevice           string
	acceptDataLoss      bool
}

func parseServeFlags(e env) (*serveFlags, error) {
	fs := flag.NewFlagSet("acds serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	f := &serveFlags{}
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address (host:port; port 0 picks a free port)")
	fs.StringVar(&f.dataDir, "data-dir", "./acds-data", "directory for the SQLite store and the simulated enclave's keys (created 0700)")
	fs.StringVar(&f.store, "store", "", "store: empty or \"sqlite\" for <data-dir>/acds.db, \"sqlite:PATH\", or a postgres://… DSN shared by replicas")
	fs.StringVar(&f.notary, "notary", "", "MPC-TLS notary: empty for the in-process notary, or the `host:port` of an acds notary")
	fs.StringVar(&f.notaryKey, "notary-key", "", "file with the trusted public key of the external notary (required with --notary host:port)")
	fs.StringVar(&f.portalCA, "portal-ca", "", "PEM file of extra root certificates trusted for portals")
	fs.BoolVar(&f.allowPrivatePortals, "allow-private-portals", false, "allow portals on loopback, private and link-local addresses (development only)")
	fs.StringVar(&f.registrations, "registrations", "", "JSON `file` of the operator's SMART client registrations by portal origin (see below)")
	fs.IntVar(&f.workers, "workers", 2*runtime.NumCPU(), "requests processed concurrently")
	fs.IntVar(&f.maxQueue, "max-queue", server.DefaultMaxQueue, "requests still processing (all replicas) beyond which POSTs answer 503 with Retry-After; 0 turns the bound off")
	fs.DurationVar(&f.retention, "retention", server.DefaultRetention, "how long an ended request keeps its input, output and proofs before they are erased (the record says when); 0 keeps everything")
	fs.Float64Var(&f.rateLimit, "rate-limit", server.DefaultRateLimit, "requests per second per token; 0 turns the limit off (load tests)")
	fs.Float64Var(&f.verifyRateLimit, "verify-rate-limit", server.DefaultVerifyRateLimit, "POST /v1/verify requests per second per client address (burst: five times it); 0 turns the limit off")
	fs.BoolVar(&f.tls, "tls", false, "serve HTTPS with the enclave's attested TLS key")
	fs.StringVar(&f.tlsCACert, "tls-ca-cert", "", "with --tls: PEM file of an operator CA certificate (then its chain) that issues the attested certificate instead of self-signing it")
	fs.StringVar(&f.tlsCAKey, "tls-ca-key", "", "with --tls: PEM file of the operator CA's private key (not group/world-readable; needs --tls-ca-cert)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.enclave, "enclave", service.EnclaveAuto, "enclave backend: auto (the SEV-SNP, TDX or TPM hardware found, else simulated, with a warning), sev-snp, tdx, tpm or sev-snp-sim")
	fs.BoolVar(&f.acceptDataLoss, "accept-data-loss", false, "start although the store lost acknowledged data (behind its high-water mark, or new while the data directory holds an installation): serve what is left, record the loss and move the mark; for one start, after looking at what was lost")
	fs.StringVar(&f.tpmDevice, "tpm-device", "/dev/tpmrm0", "the TPM of --enclave tpm (and auto): a device `path`, or mssim://HOST:PORT for swtpm's TCP command port")
	setUsage(fs, help{usage: []string{"acds serve [flags]"},
		about: `
Serves the ACDS v1 API, prints one line with the listen address once ready,
and drains in-flight requests on SIGTERM or interrupt.

--enclave chooses the TEE: SEV-SNP (configfs-tsm or /dev/sev-guest), TDX
(configfs-tsm or /dev/tdx_guest), a TPM 2.0 (--tpm-device), or the simulated
SEV-SNP enclave (keys in --data-dir; its bundles prove the code path, not
hardware). auto uses the hardware found and otherwise simulates, saying so in
the log and in the ready line. Hardware named but absent is a start-up error.
TDX offers no sealing key: credentials last one boot. A TPM server writes its
attestation key to <data-dir>/tpm-ak.pem, for acds verify --tpm-ak.

With --tls the certificate carries the enclave's boot evidence and is
self-signed, or issued by an operator CA with --tls-ca-cert and --tls-ca-key;
clients verify the evidence either way (acds verify --server).

Every 202 is on disk first. The store keeps a high-water mark outside its
database and refuses to start on a database behind it (a damaged or deleted
write-ahead log, an older copy) or new while --data-dir holds an installation,
naming the loss: restore a backup (acds backup), or start once with
--accept-data-loss to serve what is left.

--registrations names the SMART clients the smart-password and smart-form flows
use, per portal origin (other origins use the demo portal's public client):
  [{"origin": "https://portal.example", "clientId": "acds-prod",
    "redirectUri": "https://acds.example/smart/callback",
    "scopes": ["openid", "launch/patient", "patient/*.read"],
    "privateKeyFile": "keys/portal-example.pem", "keyId": "2026-01"}]
origin, clientId and redirectUri are required. privateKeyFile (PEM; ECDSA P-256,
P-384 or RSA >= 2048 bits; mode 0600; relative to the file) selects private_key_jwt
client authentication; clientSecretFile (the secret; mode 0600; relative to the file)
client_secret_basic or client_secret_post, as the portal lists them or
tokenEndpointAuthMethod names. The file is checked at start; keys and secrets are
never logged.`,
		exit: "0 after a clean drain, 1 runtime failure, 2 bad flags."})
	args, err := parseArgs(fs, e.args, e.stdout)
	if err != nil {
		return nil, err
	}
	if len(args) != 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(args, " "))
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
	if f.verifyRateLimit < 0 {
		return nil, fmt.Errorf("--verify-rate-limit must not be negative (0 turns the limit off)")
	}
	if f.maxQueue < 0 {
		return nil, fmt.Errorf("--max-queue must not be negative (0 turns the bound off)")
	}
	if f.retention < 0 {
		return nil, fmt.Errorf("--retention must not be negative (0 keeps everything)")
	}
	if _, err := parseLogLevel(f.logLevel); err != nil {
		return nil, err
	}
	if !slices.Contains(service.EnclaveKinds(), f.enclave) {
		return nil, fmt.Errorf("--enclave %q: want one of %s", f.enclave, strings.Join(service.EnclaveKinds(), ", "))
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
	// The files are read now, so that a bad one is a usage error.
	if _, err := f.files().Load(&service.Options{TLS: f.tls}, time.Now()); err != nil {
		return nil, err
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
	// An operator who sets GOGC keeps it; GOMEMLIMIT applies either way.
	f.tuneGC = e.getenv == nil || e.getenv("GOGC") == ""
	if err := serve(ctx, f, e.stdout, log, nil); err != nil {
		// One line, once: the error already says what failed.
		fmt.Fprintf(e.stderr, "acds serve: %v\n", err)
		return 1
	}
	return 0
}

// listenError says which address could not be bound, and what to do when
// it is taken.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("cannot listen on %s: the address is already in use (another acds serve? choose another --addr)", addr)
	}
	return fmt.Errorf("cannot listen on %s: %w", addr, err)
}

// enclaveNote is the part of the ready line after the address: the
// enclave profile and the measurement (code hash) verifiers must expect,
// with "simulated" for the simulated enclave. For sev-snp-sim the hash is
// that of this executable, so `go run`, `go build` and stripped builds
// differ; `acds measure FILE` prints any build's.
func enclaveNote(profile string, measurement []byte) string {
	kind := profile
	if profile == attestation.ProfileSEVSNPSim {
		kind += ", simulated"
	}
	return fmt.Sprintf("(enclave %s; measurement %s)", kind, hex.EncodeToString(measurement))
}

// serve runs the server for f, wired by package service. tune, when not
// nil, adjusts the server configuration before start (tests shorten the
// lease with it); opened functions receive the service before it serves
// (the demo takes its enclave and notary key).
func serve(ctx context.Context, f *serveFlags, stdout io.Writer, log *slog.Logger, tune func(*server.Config), opened ...func(*service.Service)) error {
	opts, issuer, err := serviceOptions(f)
	if err != nil {
		return err
	}
	// Bind first: a busy address fails fast, before the store, the
	// enclave and the notary are opened for nothing.
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return listenError(f.addr, err)
	}
	defer ln.Close() // after Shutdown, a no-op; on the early returns, frees the address
	opts.Logger, opts.Configure = log, tune
	svc, err := service.Open(ctx, opts)
	if err != nil {
		return err
	}
	// Close is idempotent: this closes the notary and the store on the
	// early returns; the drain below closes them on the normal path.
	defer svc.Close(context.Background())
	for _, fn := range opened {
		fn(svc)
	}
	srv, encl, where := svc.Server(), svc.Enclave(), svc.StoreName()
	log.Info("starting", "version", acds.Version, "store", where, "enclave", encl.Profile(),
		"measurement", hex.EncodeToString(encl.Measurement()), "workers", f.workers)

	hs := server.NewHTTPServer(srv.Handler(), server.HTTPOptions{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
	scheme := "http"
	if f.tls {
		// The certificate carries the boot evidence and is reissued for the
		// same enclave key before it expires, so attested clients keep
		// accepting a long-running server.
		// With --tls-ca-cert/--tls-ca-key an operator CA issues them.
		hosts, _ := attestedtls.ListenHosts(f.addr)
		tlsCfg, err := svc.TLSConfig(issuer, hosts...)
		if err != nil {
			return err
		}
		if issuer != nil {
			log.Info("attested TLS certificates issued by an operator CA", "ca", issuer.Certificate.Subject.String())
		}
		hs.TLSConfig = tlsCfg
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "acds %s serving on %s://%s %s\n", acds.Version, scheme, ln.Addr(), enclaveNote(encl.Profile(), encl.Measurement()))

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
	if err := svc.Close(drain); err != nil {
		log.Warn("workers did not finish in time; their requests will be re-claimed", "err", err)
	}
	log.Info("stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// files are the files the serve flags name.
func (f *serveFlags) files() service.Files {
	return service.Files{NotaryKey: f.notaryKey, Registrations: f.registrations, PortalCA: f.portalCA,
		TLSCACert: f.tlsCACert, TLSCAKey: f.tlsCAKey}
}

// serviceOptions are the service options of the serve flags, with the
// files they name read (service.Files), and the operator CA of
// --tls-ca-cert and --tls-ca-key (nil without them).
func serviceOptions(f *serveFlags) (service.Options, *attestation.Issuer, error) {
	o := service.Options{
		DataDir:             f.dataDir,
		Store:               f.store,
		Notary:              f.notary,
		AllowPrivatePortals: f.allowPrivatePortals,
		TLS:                 f.tls,
		EnclaveKind:         f.enclave,
		TPMDevice:           f.tpmDevice,
		TuneGC:              f.tuneGC,
		AcceptDataLoss:      f.acceptDataLoss,
		Server:              server.Config{Workers: f.workers, Retention: retentionConfig(f.retention), MaxQueue: maxQueueConfig(f.maxQueue)},
	}
	o.Server.RateLimit = offWhenZero(f.rateLimit) // 0 turns the limit off
	o.Server.VerifyRateLimit = offWhenZero(f.verifyRateLimit)
	issuer, err := f.files().Load(&o, time.Now())
	return o, issuer, err
}

// offWhenZero maps a rate flag onto a server.Config rate, where zero
// means the default and a negative value turns the limit off.
func offWhenZero(perSecond float64) float64 {
	if perSecond == 0 {
		return -1
	}
	return perSecond
}

// retentionConfig maps --retention onto server.Config.Retention, where
// zero means the default and a negative value keeps everything.
func retentionConfig(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// maxQueueConfig maps --max-queue onto server.Config.MaxQueue, where zero
// means the default and a negative value turns the bound off.
func maxQueueConfig(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

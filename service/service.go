package service

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/internal/serving/attestedtls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/prover"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/verify"
)

// ErrInvalidOptions is wrapped by the errors of Open and OpenStore for
// options that can never work (a missing data directory, an unknown store,
// an external notary without its key, PortalCA without a certificate).
var ErrInvalidOptions = errors.New("service: invalid options")

// Options configure Open. The zero value of every field but DataDir is
// documented and useful.
type Options struct {
	// DataDir is the installation's directory: the SQLite database (by
	// default), the enclave's state in DataDir/enclave (the simulated
	// enclave's keys and per-installation root, or a TPM's PCR-sealed key),
	// the sealed de-identification key, the in-process notary's key, the
	// replica id (replica.id) and a TPM enclave's public AK (tpm-ak.pem).
	// It is created with mode 0700 when missing. Required.
	DataDir string

	// Store names the durable store (see OpenStore): "" or "sqlite" for
	// DataDir/acds.db, "sqlite:PATH", or a "postgres://…" DSN shared by
	// several replicas. Ignored when Server.Store is set.
	Store string
	// AcceptDataLoss opens a store whose database lost acknowledged data
	// — behind its durable high-water mark, or new or empty while the
	// data directory holds an installation's state (see OpenStore) —
	// instead of refusing to start: the server serves what is left, the
	// acceptance is recorded in the database and logged, and the mark
	// moves to the database as it is. A damaged database file cannot be
	// opened either way. Meant for one start after a loss the operator
	// has looked at (`acds serve --accept-data-loss`); without a loss it
	// changes nothing. Zero value: refuse.
	AcceptDataLoss bool

	// Notary is the host:port of an external MPC-TLS notary (`acds
	// notary`). Zero value: an in-process notary listening on
	// 127.0.0.1 on a free port, its Ed25519 key kept in DataDir/notary.key.
	Notary string
	// NotaryKey is the external notary's public key, which statements must
	// be signed with. Required with Notary, refused without it.
	NotaryKey ed25519.PublicKey

	// PortalCA is PEM certificates trusted as portal roots in addition to
	// the system's (a test portal's CA, an internal CA). Zero value: the
	// system roots only. It must hold at least one certificate when set.
	PortalCA []byte
	// AllowPrivatePortals admits portals on loopback, private, link-local
	// and metadata addresses, at the API and at every dial of the fetcher
	// and the in-process notary. Zero value: only public addresses, the
	// production setting.
	AllowPrivatePortals bool
	// PortalRegistrations are the operator's SMART client registrations
	// by portal origin, for the smart-password and smart-form flows (see
	// portal.Connector.Registrations; portal.LoadRegistrations reads a
	// registrations file). Open refuses them unless
	// portal.CheckRegistrations accepts them. They are never logged with
	// their keys. Zero value: none; every origin uses the demo portal's
	// public client.
	PortalRegistrations map[string]portal.Registration

	// Enclave is the enclave backend to run on (any attestation.Backend:
	// a device of package attestation/…/device, the simulated enclave, one
	// of the embedder's own). Open does not close it. Zero value:
	// OpenBackend(EnclaveKind) with state in DataDir/enclave, closed by
	// Close.
	Enclave attestation.Backend
	// EnclaveKind chooses the backend when Enclave is nil: one of
	// EnclaveKinds ("auto", "sev-snp", "tdx", "tpm", "sev-snp-sim").
	// Absent hardware is an error naming the device. Zero value:
	// "sev-snp-sim", the simulated enclave (`acds serve` defaults to
	// "auto").
	EnclaveKind string
	// TPMDevice is the TPM of the "tpm" kind (and of "auto"): a character
	// device or mssim://HOST:PORT. Zero value: /dev/tpmrm0.
	TPMDevice string

	// TLS has the enclave make a second, attested key for TLS, bound by
	// the same boot quote; TLSConfig then serves certificates for it that
	// carry the boot evidence. Zero value: no TLS key, and TLSConfig fails.
	TLS bool

	// TuneGC has the service set the garbage collector's GOGC percentage
	// while it is open (see tuneGC), restoring the default at Close. That
	// is process-wide state: set it when the process serves nothing else,
	// as `acds serve` does unless GOGC is set in its environment. Zero
	// value: the collector is left as it is.
	TuneGC bool

	// Logger receives structured logs (never secrets). Zero value:
	// discarded. It is also the server's logger unless Server.Logger is set.
	Logger *slog.Logger

	// Server is the base server configuration: its limits, workers, lease,
	// clock and so on, with the zero values documented in server.Config.
	// Open sets Pipeline, Enclave, Verifier and Fetcher, and Store unless
	// it is set; a Store set here is
	// used as is and Close does not close it.
	Server server.Config
	// Configure, when set, is called with the complete server
	// configuration just before the server starts, and may change it (a
	// test wraps the store or the fetcher). Zero value: no change.
	Configure func(*server.Config)

	// portalResolver, when set, resolves portal names for the in-process
	// notary instead of net.DefaultResolver (tests set a stub through
	// export_test.go, so that none resolves a public name).
	portalResolver notary.Resolver
}

// Service is a running ACDS server with its real dependencies: the
// durable store, the enclave (hardware, or a simulated SEV-SNP chip whose
// keys live in the data directory), the FHIR pipeline with the installation's
// de-identification key, the portal fetcher through the MPC-TLS prover and
// a notary, and the verifier behind POST /v1/verify. Mount Handler where
// the API should answer and Close the Service when done. Its methods are
// safe for concurrent use.
type Service struct {
	srv        *server.Server
	st         store.Store
	ownStore   bool
	storeName  string
	encl       *attestation.Enclave
	backend    io.Closer // the backend Open opened, when it must be closed
	policy     verify.Policy
	notaryAddr string
	notaryKeys []ed25519.PublicKey
	inProcess  ed25519.PublicKey // the in-process notary's key; nil for an external one
	stopNotary func() error
	stopTrust  context.CancelFunc // stops the refresh of the trust anchors
	stopGC     func()             // stops tuneGC and waits for it; nil when not tuning
	lock       *dirLock           // DataDir/LOCK, held until Close

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool // Close has begun: Handler answers 503
}

// Open opens the store, starts the enclave and the notary (unless an
// external one is configured), and starts a server wired to them. It does
// not listen for HTTP: mount Handler in your own http.Server or mux.
// On error everything opened so far is closed again.
//
// Open first takes an exclusive lock on DataDir/LOCK (flock on unix
// systems), held until Close: while one Service holds a data directory,
// another Open of it, in this process or another, fails with a
// *DataDirLockedError (errors.Is ErrDataDirLocked) naming the directory
// and the holder's pid. Replicas sharing a PostgreSQL store each use their
// own data directory.
func Open(ctx context.Context, o Options) (_ *Service, err error) {
	if o.DataDir == "" {
		return nil, fmt.Errorf("%w: DataDir is required", ErrInvalidOptions)
	}
	switch {
	case o.Notary != "" && len(o.NotaryKey) != ed25519.PublicKeySize:
		return nil, fmt.Errorf("%w: Notary needs NotaryKey, the external notary's %d-byte Ed25519 public key", ErrInvalidOptions, ed25519.PublicKeySize)
	case o.Notary == "" && o.NotaryKey != nil:
		return nil, fmt.Errorf("%w: NotaryKey is only for an external Notary", ErrInvalidOptions)
	}
	if o.Notary != "" {
		if _, _, err := net.SplitHostPort(o.Notary); err != nil {
			return nil, fmt.Errorf("%w: Notary %q: want host:port: %w", ErrInvalidOptions, o.Notary, err)
		}
	}
	roots, err := portalRoots(o.PortalCA)
	if err != nil {
		return nil, err
	}
	if err := portal.CheckRegistrations(o.PortalRegistrations); err != nil {
		return nil, fmt.Errorf("%w: PortalRegistrations: %w", ErrInvalidOptions, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}

	s := &Service{stopNotary: func() error { return nil }}
	defer func() {
		if err != nil {
			_ = s.release()
		}
	}()
	// One service per data directory: its store, enclave keys and
	// notary key are not shared. The store may be (PostgreSQL replicas),
	// so only the directory is locked.
	if s.lock, err = lockDataDir(o.DataDir); err != nil {
		return nil, err
	}
	if o.Server.Store != nil {
		s.st, s.storeName = o.Server.Store, "provided"
	} else {
		accepted := func(loss error) {
			log.Warn("started on a store that lost data, as AcceptDataLoss allows: the loss is recorded in the database and the high-water mark moved to it", "loss", loss.Error())
		}
		if s.st, s.storeName, err = openStore(ctx, o.Store, o.DataDir, o.AcceptDataLoss, accepted); err != nil {
			return nil, err
		}
		s.ownStore = true
	}
	backend := o.Enclave
	if backend == nil {
		if backend, err = OpenBackend(ctx, o.EnclaveKind, BackendOptions{StateDir: filepath.Join(o.DataDir, "enclave"), TPMDevice: o.TPMDevice, Logger: log}); err != nil {
			return nil, fmt.Errorf("enclave: %w", err)
		}
		if c, ok := backend.(io.Closer); ok {
			s.backend = c
		}
	}
	if s.encl, err = attestation.New(ctx, backend, attestation.Options{TLS: o.TLS}); err != nil {
		return nil, fmt.Errorf("enclave %s: %w", backend.Profile(), err)
	}
	if !s.encl.PersistentSealing() {
		log.Warn("the enclave offers no sealing key: portal credentials are sealed for this boot only, and requests still queued after a restart end failed",
			"enclave", s.encl.Profile())
	}
	deidKey, err := deidentificationKey(s.encl, filepath.Join(o.DataDir, "deidentify.key.sealed"), log)
	if err != nil {
		return nil, err
	}
	if err := s.publishTPMKey(o.DataDir, log); err != nil {
		return nil, err
	}
	guard := portal.Guard{AllowPrivate: o.AllowPrivatePortals}
	if err := s.startNotary(o, guard, roots, log); err != nil {
		return nil, err
	}
	if s.policy, err = verify.TrustEnclave(verify.Policy{NotaryKeys: s.notaryKeys}, s.encl.BootEvidence(), s.encl.Measurement()); err != nil {
		return nil, fmt.Errorf("verifier policy: %w", err)
	}
	fetcher := &portal.Fetcher{
		Connector:    portal.Connector{Guard: guard, Registrations: o.PortalRegistrations},
		NewTransport: portal.Notarized{Notary: s.notaryAddr, NotaryKeys: s.notaryKeys, TLSConfig: &tls.Config{RootCAs: roots}, Guard: guard}.Factory(),
		CheckHost:    prover.CheckServerName,
	}

	cfg := o.Server
	cfg.Store = s.st
	cfg.Pipeline = server.FHIRPipeline{DeidentKey: deidKey}
	replica, err := replicaID(filepath.Join(o.DataDir, "replica.id"))
	if err != nil {
		return nil, err
	}
	// POST /v1/verify trusts this enclave and the replicas registered in
	// a shared store (see trust.go).
	reg, _ := s.st.(store.TrustRegistry)
	if reg == nil {
		log.Warn("the store keeps no trust anchors (store.TrustRegistry): POST /v1/verify trusts this replica's bundles only")
	}
	sv, err := newSharedVerifier(s.policy, reg, "replica:"+replica, log)
	if err != nil {
		return nil, err
	}
	anchor, err := ownAnchor(s.encl.BootEvidence(), s.encl.Measurement(), s.notaryKeys)
	if err != nil {
		return nil, fmt.Errorf("trust anchor: %w", err)
	}
	if err := sv.register(ctx, anchor); err != nil {
		return nil, err
	}
	trustCtx, stopTrust := context.WithCancel(context.Background())
	s.stopTrust = stopTrust
	go sv.run(trustCtx)
	cfg.Enclave = withReplica(server.AttestationEnclave(s.encl, s.inProcess), "replica:"+replica, sv)
	cfg.Verifier = sv
	cfg.Fetcher = fetcher
	if cfg.Logger == nil {
		cfg.Logger = log
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	if s.srv, err = server.New(cfg); err != nil {
		return nil, err
	}
	if o.TuneGC {
		gcCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); tuneGC(gcCtx, gcHeapFloor) }()
		s.stopGC = func() { stop(); <-done }
	}
	return s, nil
}

// portalRoots is the system roots plus the certificates of caPEM.
func portalRoots(caPEM []byte) (*x509.CertPool, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if len(caPEM) != 0 && !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: PortalCA holds no PEM certificate", ErrInvalidOptions)
	}
	return roots, nil
}

// startNotary starts the in-process notary on loopback, or takes the
// external one of o, and records its address and the trusted keys.
func (s *Service) startNotary(o Options, guard portal.Guard, roots *x509.CertPool, log *slog.Logger) error {
	if o.Notary != "" {
		s.notaryAddr, s.notaryKeys = o.Notary, []ed25519.PublicKey{slices.Clone(o.NotaryKey)}
		log.Info("using an external notary", "addr", o.Notary)
		return nil
	}
	key, created, err := notary.LoadOrCreateKey(filepath.Join(o.DataDir, "notary.key"))
	if err != nil {
		return fmt.Errorf("in-process notary: %w", err)
	}
	// The notary resolves and dials the portal itself: it applies the
	// same address guard as the connectors.
	n, err := notary.New(notary.Config{Key: key, Roots: roots, AllowAddr: guard.AllowAddrPort, Resolver: o.portalResolver})
	if err != nil {
		return fmt.Errorf("in-process notary: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("in-process notary: %w", err)
	}
	go func() { _ = n.Serve(ln) }()
	s.stopNotary = n.Close
	s.notaryAddr, s.inProcess = ln.Addr().String(), n.PublicKey()
	s.notaryKeys = []ed25519.PublicKey{s.inProcess}
	log.Info("in-process notary started", "addr", s.notaryAddr, "key_created", created)
	return nil
}

// Handler is the HTTP handler of the v1 API (see server.Server.Handler):
// it serves paths that start with /v1/ and can be mounted under any prefix
// with http.StripPrefix. Once Close has begun it answers every request 503
// unavailable, "this service is closed", without Retry-After: its store is
// closed for good, and "retry later" would mislead clients.
func (s *Service) Handler() http.Handler {
	h := s.srv.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.closed.Load() {
			writeClosed(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// writeClosed answers a request to a closed Service.
func writeClosed(w http.ResponseWriter) {
	b, _ := json.Marshal(acds.NewProblem(acds.ProblemUnavailable, "this service is closed"))
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(b)
}

// Server is the running server.
func (s *Service) Server() *server.Server { return s.srv }

// Store is the durable store the server uses.
func (s *Service) Store() store.Store { return s.st }

// StoreName describes the store for logs without any secret:
// "sqlite:PATH", "postgres", or "provided" for Options.Server.Store.
func (s *Service) StoreName() string { return s.storeName }

// Enclave is the running enclave: its profile, measurement (the code hash
// verifiers expect) and boot evidence.
func (s *Service) Enclave() *attestation.Enclave { return s.encl }

// NotaryAddr is the host:port of the MPC-TLS notary in use.
func (s *Service) NotaryAddr() string { return s.notaryAddr }

// NotaryKey is the in-process notary's public key, or nil when an
// external notary is configured. Offline verifiers trust it only when
// their policy names it (verify.Policy.NotaryKeys).
func (s *Service) NotaryKey() ed25519.PublicKey { return slices.Clone(s.inProcess) }

// Policy is the verification policy of POST /v1/verify for this
// replica's own bundles: this enclave's measurement (and, for the
// simulated profile, this installation's root) and the notary key in use.
// POST /v1/verify also trusts the replicas registered in a shared store
// (see the package documentation). It trusts what the server says about itself;
// an independent verifier builds its policy from published reference
// values instead.
func (s *Service) Policy() verify.Policy {
	p := s.policy
	p.NotaryKeys = slices.Clone(p.NotaryKeys)
	p.SimulatedRoots = slices.Clone(p.SimulatedRoots)
	return p
}

// TLSConfig returns a TLS server configuration that serves the enclave's
// attested certificate: for the TLS key the boot quote binds, carrying
// the boot evidence, reissued for the same key before it expires. It is
// self-signed, or issued by issuer when not nil. hosts are extra DNS names
// or IP addresses for the certificate ("localhost", 127.0.0.1 and ::1 are
// always included). It needs Options.TLS (else it wraps
// attestation.ErrNoTLSKey).
func (s *Service) TLSConfig(issuer *attestation.Issuer, hosts ...string) (*tls.Config, error) {
	certs, err := attestedtls.NewCertificates(s.encl, attestedtls.Options{Hosts: hosts, Issuer: issuer})
	if err != nil {
		return nil, fmt.Errorf("attested TLS: %w", err)
	}
	return certs.TLSConfig(), nil
}

// Close drains the server (see server.Server.Close: in-flight requests
// finish until ctx ends, and are re-claimed after a restart otherwise),
// then stops the in-process notary and closes the store it opened. From
// its start, Handler answers 503 "this service is closed"; stop serving it
// first. Close
// returns ctx.Err() when it had to abandon work; further calls return the
// first call's result.
func (s *Service) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		var err error
		if s.srv != nil {
			err = s.srv.Close(ctx)
		}
		s.closeErr = errors.Join(err, s.release())
	})
	return s.closeErr
}

// release stops the notary, closes an owned store and the enclave
// backend Open opened.
func (s *Service) release() error {
	var errs []error
	if s.stopTrust != nil {
		s.stopTrust()
	}
	if s.stopGC != nil {
		s.stopGC()
	}
	if err := s.stopNotary(); err != nil && !errors.Is(err, net.ErrClosed) {
		errs = append(errs, fmt.Errorf("notary: %w", err))
	}
	if s.ownStore && s.st != nil {
		if err := s.st.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: %w", err))
		}
	}
	if s.backend != nil {
		if err := s.backend.Close(); err != nil {
			errs = append(errs, fmt.Errorf("enclave: %w", err))
		}
	}
	if err := s.lock.release(); err != nil {
		errs = append(errs, fmt.Errorf("data dir lock: %w", err))
	}
	return errors.Join(errs...)
}

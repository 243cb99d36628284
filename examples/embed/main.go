// Command embed mounts the ACDS API inside an existing HTTP application:
// the application keeps its own routes, and the API answers under
// /clinical/ (POST /clinical/v1/process, GET /clinical/v1/requests/{id},
// …; Location headers keep the prefix).
//
//	go run ./examples/embed [-addr 127.0.0.1:8090] [-data-dir ./embed-data]
//
// The server is wired from public packages: the FHIR pipeline of package
// fhir, a simulated SEV-SNP enclave (package attestation/sim; its keys in
// -data-dir) and the offline verifier of package verify. The store is
// server/servertest's in-memory store, because no durable store is public
// yet: requests do not survive a restart (`acds serve` uses SQLite or
// PostgreSQL). Portal fetching is not wired, so fetch-and-attest requests
// end with "unavailable"; see cmd/acds/serve.go for the full wiring.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/verify"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("embed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	dataDir := fs.String("data-dir", "./embed-data", "directory for the simulated enclave's keys")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	srv, err := newACDS(ctx, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "embed: %v\n", err)
		return 1
	}
	defer srv.Close(context.Background())
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "embed: %v\n", err)
		return 1
	}
	hs := &http.Server{Handler: appMux(srv), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(shut)
	}()
	fmt.Fprintf(stdout, "application on http://%s/, ACDS API on http://%s/clinical/v1/\n", ln.Addr(), ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "embed: %v\n", err)
		return 1
	}
	return 0
}

// appMux is the application's own mux with ACDS mounted under /clinical/.
func appMux(srv *server.Server) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "my clinic's application; the attested clinical data API is under /clinical/v1/")
	})
	mux.Handle("/clinical/", http.StripPrefix("/clinical", srv.Handler()))
	return mux
}

// newACDS builds the server from public packages (see the package doc).
func newACDS(ctx context.Context, dataDir string) (*server.Server, error) {
	encl, err := sim.Open(ctx, dataDir, attestation.Options{})
	if err != nil {
		return nil, fmt.Errorf("enclave: %w", err)
	}
	p, err := verify.TrustEnclave(verify.Policy{}, encl.BootEvidence(), encl.Measurement())
	if err != nil {
		return nil, err
	}
	return server.New(server.Config{
		Store:    servertest.NewMemStore(),
		Pipeline: pipeline{},
		Enclave:  enclave{encl},
		Verifier: verifier{verify.New(p)},
	})
}

// pipeline is the server.Pipeline (and server.Checker) of package fhir.
// The de-identification key is left empty here: pseudonyms are then keyed
// per process; `acds serve` keeps a sealed per-installation key.
type pipeline struct{}

func (pipeline) Check(ctx context.Context, input []byte) error {
	return fhirError(fhir.Check(input, fhir.Options{}))
}

func (pipeline) Process(ctx context.Context, input []byte, o server.ProcessOptions) (*server.Output, error) {
	out, err := fhir.Process(input, fhir.Options{Format: o.Format, Source: o.Source, Measurement: o.Measurement, Now: o.Now})
	if err != nil {
		return nil, fhirError(err)
	}
	return &server.Output{JSON: out.JSON, Digest: out.Digest}, nil
}

// fhirError turns invalid FHIR into the server's 422 invalid-fhir error.
func fhirError(err error) error {
	var inv *fhir.InvalidError
	if !errors.As(err, &inv) {
		return err
	}
	oo, _ := inv.Outcome.MarshalJSON()
	return &server.InvalidFHIRError{Detail: fmt.Sprintf("%d errors", inv.Outcome.ErrorCount()), OperationOutcome: oo}
}

// enclave is the server.Enclave of an attestation.Enclave.
type enclave struct{ e *attestation.Enclave }

func (s enclave) Profile() string                     { return s.e.Profile() }
func (s enclave) Measurement() string                 { return hex.EncodeToString(s.e.Measurement()) }
func (s enclave) Seal(p, ad []byte) ([]byte, error)   { return s.e.Seal(p, ad) }
func (s enclave) Unseal(c, ad []byte) ([]byte, error) { return s.e.Open(c, ad) }
func (s enclave) Attest(ctx context.Context, c server.Claims) ([]byte, error) {
	claims := attestation.Claims{RequestID: c.RequestID, OutputFormat: c.OutputFormat, OutputDigest: c.OutputDigest,
		IssuedAt: c.IssuedAt, Source: attestation.Source{Kind: c.Source, InputDigest: c.InputDigest}}
	return s.e.Attest(ctx, claims, nil)
}

func (s enclave) BootEvidence() acds.Attestation {
	b := s.e.BootEvidence()
	a := acds.Attestation{Profile: b.Profile, Measurement: hex.EncodeToString(s.e.Measurement()), Evidence: b.Evidence,
		Certificates: [][]byte{}, SigningKey: b.SigningKey, TLSKey: b.TLSKey, BootNonce: b.Nonce, Boot: s.e.MarshalBootEvidence()}
	if ev, err := sevsnp.ParseEvidence(b.Evidence); err == nil {
		for _, c := range [][]byte{ev.VCEK, ev.ASK, ev.ARK} {
			if len(c) > 0 {
				a.Certificates = append(a.Certificates, c)
			}
		}
	}
	return a
}

// verifier serves POST /v1/verify with package verify, trusting this
// server's own enclave.
type verifier struct{ v *verify.Verifier }

func (s verifier) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
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

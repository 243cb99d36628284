// Command embed mounts the ACDS API inside an existing HTTP application:
// the application keeps its own routes, and the API answers under
// /clinical/ (POST /clinical/v1/process, GET /clinical/v1/requests/{id},
// …; Location headers keep the prefix).
//
//	go run ./examples/embed [-addr 127.0.0.1:8090] [-data-dir ./embed-data] [-store postgres://…]
//
// Package service opens the same server as `acds serve`: a durable store
// (SQLite in -data-dir, or the PostgreSQL of -store), a simulated SEV-SNP
// enclave whose keys are sealed in -data-dir, the FHIR pipeline, portal
// fetching through the MPC-TLS prover and an in-process notary, and the
// verifier behind POST /v1/verify. Every accepted request is on disk
// before its 202, so a restart with the same -data-dir carries on.
package main

import (
	"context"
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

	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/service"
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
	dataDir := fs.String("data-dir", "./embed-data", "directory for the SQLite store and the enclave's and notary's keys")
	store := fs.String("store", "", `store: empty for SQLite in -data-dir, "sqlite:PATH" or a postgres:// DSN`)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	svc, err := service.Open(ctx, service.Options{DataDir: *dataDir, Store: *store})
	if err != nil {
		fmt.Fprintf(stderr, "embed: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		_ = svc.Close(context.Background())
		fmt.Fprintf(stderr, "embed: %v\n", err)
		return 1
	}
	// NewHTTPServer sets the connection limits the API relies on (header
	// and idle timeouts, header size); the Handler bounds bodies itself.
	hs := server.NewHTTPServer(appMux(svc.Handler()), server.HTTPOptions{})
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "application on http://%s/, ACDS API on http://%s/clinical/v1/\n", ln.Addr(), ln.Addr())

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	// Stop taking HTTP requests first, then drain the workers and close
	// the notary and the store.
	drain, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = hs.Shutdown(drain)
	if err := svc.Close(drain); err != nil {
		fmt.Fprintf(stderr, "embed: close: %v\n", err)
		return 1
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "embed: %v\n", serveErr)
		return 1
	}
	return 0
}

// appMux is the application's own mux with the ACDS API mounted under
// /clinical/.
func appMux(api http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "my clinic's application; the attested clinical data API is under /clinical/v1/")
	})
	mux.Handle("/clinical/", http.StripPrefix("/clinical", api))
	return mux
}

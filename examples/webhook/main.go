// Command webhook is an example receiver of ACDS webhooks (DESIGN §10): it
// accepts a delivery only when it was signed by an enclave whose boot
// evidence verifies under the receiver's own policy, prints each request's
// outcome once (deliveries are at least once: it deduplicates with the
// Idempotency-Key) and answers 204; anything else is 401.
//
//	webhook -acds https://acds.example -measurement HEX -cert cert.pem -key key.pem [-addr 127.0.0.1:9443]
//	webhook -acds http://127.0.0.1:8080 -measurement HEX -allow-simulated -cert … -key …   (development servers)
//
// The boot evidence comes from the server's GET /v1/attestation, fetched
// at start and again when a delivery names another boot key (the server
// restarted): trusting it costs nothing, since the policy, not the server,
// decides whether it is genuine. Submit requests with "callbackUrl":
// "https://<this receiver>/".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/verify"
	"github.com/acds-project/acds/webhook"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9443", "listen address")
	base := fs.String("acds", "", "base URL of the ACDS server whose deliveries to accept")
	measurement := fs.String("measurement", "", "the code hash (hex) to accept: what the server's ready line or `acds measure` prints")
	allowSim := fs.Bool("allow-simulated", false, "accept a simulated enclave (development servers)")
	cert := fs.String("cert", "", "TLS certificate file (callback URLs are https)")
	key := fs.String("key", "", "TLS key file")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0 // -h: the usage was printed
	} else if err != nil {
		return 2
	}
	if *base == "" || *measurement == "" || *cert == "" || *key == "" {
		fmt.Fprintln(stderr, "webhook: --acds, --measurement, --cert and --key are required")
		fs.Usage()
		return 2
	}
	ms, err := verify.ParseMeasurements(*measurement)
	if err != nil {
		fmt.Fprintln(stderr, "webhook:", err)
		return 2
	}
	v, err := verify.New(verify.Policy{Measurements: ms, UnsafeAllowSimulation: *allowSim, UnsafeTrustBundleSimulatedRoot: *allowSim})
	if err != nil {
		fmt.Fprintln(stderr, "webhook:", err)
		return 2
	}
	c, err := client.New(*base, nil)
	if err != nil {
		fmt.Fprintln(stderr, "webhook:", err)
		return 2
	}
	boot := func(ctx context.Context) ([]byte, error) {
		a, err := c.Attestation(ctx)
		if err != nil {
			return nil, err
		}
		return a.Boot, nil
	}
	srv := &http.Server{Addr: *addr, Handler: NewReceiver(v, boot, os.Stdout), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	fmt.Fprintf(stderr, "webhook: receiving on https://%s/\n", *addr)
	if err := srv.ListenAndServeTLS(*cert, *key); err != nil {
		fmt.Fprintln(stderr, "webhook:", err)
		return 1
	}
	return 0
}

// Receiver is the receiving http.Handler.
type Receiver struct {
	v     *verify.Verifier
	fetch func(context.Context) ([]byte, error)
	out   io.Writer

	mu   sync.Mutex
	boot []byte
	seen map[string]bool
}

// NewReceiver returns a receiver that verifies deliveries with v against
// the boot evidence fetch returns, and prints each outcome once to out.
func NewReceiver(v *verify.Verifier, fetch func(context.Context) ([]byte, error), out io.Writer) *Receiver {
	return &Receiver{v: v, fetch: fetch, out: out, seen: map[string]bool{}}
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, webhook.MaxPayloadSize+1))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	sig := r.Header.Get(webhook.SignatureHeader)
	p, err := rc.verify(r.Context(), sig, body, false)
	if errors.Is(err, webhook.ErrSignature) {
		p, err = rc.verify(r.Context(), sig, body, true) // another boot key: the server restarted
	}
	if err != nil {
		http.Error(w, "not a delivery from a trusted enclave", http.StatusUnauthorized)
		return
	}
	key := r.Header.Get(webhook.IdempotencyHeader)
	rc.mu.Lock()
	dup := rc.seen[key]
	rc.seen[key] = true
	rc.mu.Unlock()
	if !dup {
		switch {
		case p.Error != nil:
			fmt.Fprintf(rc.out, "request %s %s: %s\n", p.RequestID, p.Status, p.Error.Code())
		default:
			fmt.Fprintf(rc.out, "request %s %s: output %s\n", p.RequestID, p.Status, p.OutputDigest)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// verify checks a delivery against the cached boot evidence, fetching it
// first when there is none or refresh is set.
func (rc *Receiver) verify(ctx context.Context, sig string, body []byte, refresh bool) (*webhook.Payload, error) {
	rc.mu.Lock()
	boot := rc.boot
	rc.mu.Unlock()
	if boot == nil || refresh {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		b, err := rc.fetch(ctx)
		if err != nil {
			return nil, err
		}
		rc.mu.Lock()
		rc.boot, boot = b, b
		rc.mu.Unlock()
	}
	p, _, err := webhook.Verify(rc.v, boot, sig, body)
	return p, err
}

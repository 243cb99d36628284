package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/internal/demo/demoportal/demoportaltest"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/service"
)

// Naming hardware this machine lacks is a start-up error naming the
// device; an unknown kind is ErrUnknownEnclave.
func TestOpenBackendAbsentHardware(t *testing.T) {
	ctx := context.Background()
	tpmPath := filepath.Join(t.TempDir(), "tpmrm0")
	for _, tc := range []struct {
		kind, device string
		paths        []string
	}{
		{service.EnclaveSEVSNP, "/dev/sev-guest", []string{"/dev/sev-guest", "/sys/kernel/config/tsm/report"}},
		{service.EnclaveTDX, "/dev/tdx_guest", []string{"/dev/tdx_guest", "/sys/kernel/config/tsm/report"}},
		{service.EnclaveTPM, tpmPath, nil},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			for _, p := range tc.paths {
				if _, err := os.Stat(p); err == nil {
					t.Skipf("%s is present", p)
				}
			}
			_, err := service.Open(ctx, service.Options{DataDir: t.TempDir(), EnclaveKind: tc.kind, TPMDevice: tpmPath})
			if !errors.Is(err, attestation.ErrNoTEE) || !strings.Contains(err.Error(), tc.device) {
				t.Fatalf("Open with --enclave %s here: %v", tc.kind, err)
			}
		})
	}
	if _, err := service.OpenBackend(ctx, "sgx", service.BackendOptions{StateDir: t.TempDir()}); !errors.Is(err, service.ErrUnknownEnclave) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// auto without hardware simulates, loudly: a warning in the log, and the
// simulated profile in the enclave (hence in /v1/health and every bundle).
// Hardware it detects but cannot open is an error, not a fallback.
func TestOpenBackendAuto(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	b, err := service.OpenBackendForTest(ctx, service.EnclaveAuto, service.BackendOptions{StateDir: t.TempDir(), Logger: log},
		func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if b.Profile() != attestation.ProfileSEVSNPSim {
		t.Fatalf("auto without hardware: %s", b.Profile())
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), "SIMULATED") {
		t.Fatalf("auto's fallback is quiet: %s", logs.String())
	}
	// A TPM "found" that does not answer: the error names it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = service.OpenBackendForTest(ctx, service.EnclaveAuto, service.BackendOptions{StateDir: t.TempDir(), TPMDevice: "mssim://" + addr},
		func(k string) bool { return k == service.EnclaveTPM })
	if !errors.Is(err, attestation.ErrNoTEE) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("auto with an unanswering TPM: %v", err)
	}

	// Through Open and the API: health names the simulated profile.
	_, c := open(t, service.Options{DataDir: dataDir(t), EnclaveKind: service.EnclaveAuto})
	h, err := c.Health(ctx)
	if err != nil || h.Enclave != attestation.ProfileSEVSNPSim {
		t.Fatalf("health: %+v %v", h, err)
	}
}

// perBoot is a backend without a sealing key, as TDX: the simulated chip
// for evidence, attestation.ErrNoSealingKey for sealing.
type perBoot struct{ *sim.Backend }

func (perBoot) SealingKey(context.Context) ([]byte, error) {
	return nil, fmt.Errorf("test: %w", attestation.ErrNoSealingKey)
}

func newPerBoot(t *testing.T, dir string) perBoot {
	t.Helper()
	b, err := sim.NewBackend(filepath.Join(dir, "enclave"), sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	return perBoot{b}
}

// blockingFetcher holds every fetch until its context ends.
type blockingFetcher struct {
	server.Fetcher
	started chan struct{}
}

func (f blockingFetcher) Fetch(ctx context.Context, r portal.Request) (*portal.Result, error) {
	f.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// An enclave without a sealing key (TDX) fetches and attests within one
// boot; a fetch still queued when it restarts ends failed, saying why,
// never internal.
func TestPerBootSealing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	demo := demoportaltest.Start(t, demoportal.Options{Patients: 1, Seed: 3})
	req := acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: "https://localhost:" + demo.Port + "/fhir",
		RecordID: demo.Patients()[0].ID, OutputFormat: acds.OutputFHIRR4,
		Username: demoportal.Username, Password: demoportal.Password}
	dir := t.TempDir()
	base := service.Options{DataDir: dir, PortalCA: demo.CACertPEM(), AllowPrivatePortals: true, Server: server.Config{Lease: time.Second}}

	o := base
	o.Enclave = newPerBoot(t, dir)
	bf := blockingFetcher{started: make(chan struct{}, 1)}
	block := false
	o.Configure = func(c *server.Config) {
		if block {
			bf.Fetcher = c.Fetcher
			c.Fetcher = bf
		}
	}
	svc1, c1 := open(t, o)
	if svc1.Enclave().PersistentSealing() {
		t.Fatal("a backend without a sealing key reported persistent sealing")
	}
	c1, token := session(t, ctx, c1)
	acc, err := c1.FetchAndAttest(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := c1.Wait(ctx, acc.RequestID); err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("fetch within one boot: %+v %v", rec, err)
	}
	if err := svc1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Boot 2 accepts a fetch, then stops before fetching it.
	o.Enclave, block = newPerBoot(t, dir), true
	svc2, c2 := open(t, o)
	c2 = c2.WithToken(token)
	acc2, err := c2.FetchAndAttest(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	<-bf.started
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_ = svc2.Close(short)

	// Boot 3 holds another per-boot key: the queued fetch fails, saying why.
	o.Enclave, block = newPerBoot(t, dir), false
	_, c3 := open(t, o)
	c3 = c3.WithToken(token)
	_, _ = c3.Wait(ctx, acc2.RequestID) // the request's problem is its error
	rec, err := c3.Request(ctx, acc2.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != acds.StatusFailed || rec.Error == nil || rec.Error.Code() != acds.ProblemUnavailable ||
		!strings.Contains(rec.Error.Detail, "sealed under an enclave key this server no longer holds") {
		t.Fatalf("queued fetch after a restart without persistent sealing: %+v %+v", rec, rec.Error)
	}
}

package device_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/tpm/device"
)

func TestAbsentDeviceNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tpmrm9")
	_, err := device.Open(context.Background(), device.Options{Path: path, StateDir: t.TempDir()})
	if !errors.Is(err, attestation.ErrNoTEE) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a missing TPM: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	ctx := context.Background()
	// Nothing listens on a port just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for name, o := range map[string]device.Options{
		"no state dir":       {Path: "mssim://" + addr},
		"mssim without port": {Path: "mssim://localhost", StateDir: t.TempDir()},
		"mssim refused":      {Path: "mssim://" + addr, StateDir: t.TempDir()},
		"PCR 24":             {Path: "mssim://" + addr, StateDir: t.TempDir(), PCRs: []int{24}},
		"no PCR":             {Path: "mssim://" + addr, StateDir: t.TempDir(), PCRs: []int{}},
	} {
		if _, err := device.Open(ctx, o); err == nil {
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

// garbageTPM answers every command with bytes that are not a TPM response.
type garbageTPM struct{ bytes.Buffer }

func (g *garbageTPM) Read(p []byte) (int, error) {
	return copy(p, []byte{0x80, 0x01, 0, 0, 0, 10, 0, 0, 0x01, 0x01}), nil
}

func TestGarbageTPM(t *testing.T) {
	_, err := device.Open(context.Background(), device.Options{Transport: &garbageTPM{}, StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "attestation key") {
		t.Fatalf("Open on a non-TPM: %v", err)
	}
}

// An mssim peer that answers with an oversized length is an error, not an
// allocation of what it claims.
func TestMSSimBoundsResponses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err == nil {
			_, _ = c.Write([]byte{0x7f, 0xff, 0xff, 0xff})
		}
	}()
	_, err = device.Open(context.Background(), device.Options{Path: "mssim://" + ln.Addr().String(), StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("oversized response: %v", err)
	}
}

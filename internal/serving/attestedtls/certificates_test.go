package attestedtls_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/internal/serving/attestedtls"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Certificates reissue for the same key in the last third of their
// validity; clients keep accepting them, from the cache.
func TestCertificatesRotate(t *testing.T) {
	h := getHarness(t)
	clk := &clock{t: time.Now()}
	e, err := attestation.New(context.Background(), h.backend, attestation.Options{TLS: true, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := attestedtls.NewCertificates(e, attestedtls.Options{Validity: 3 * time.Hour, Now: clk.now,
		Hosts: []string{"acds.example.org", "10.1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	get := func() *tls.Certificate {
		t.Helper()
		c, err := certs.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1 := get()
	if !slices.Contains(c1.Leaf.DNSNames, "acds.example.org") || !slices.ContainsFunc(c1.Leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("10.1.2.3")) }) {
		t.Fatalf("names %v %v lack the configured hosts", c1.Leaf.DNSNames, c1.Leaf.IPAddresses)
	}
	p := h.policy(t)
	p.Now = clk.now
	ch := mustChecker(t, p, nil)
	base, _ := h.serveTLS(t, certs.TLSConfig())
	dial := func() {
		t.Helper()
		c, err := tls.Dial("tcp", base[len("https://"):], ch.TLSConfig("localhost"))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	dial()

	clk.add(time.Hour)
	if get() != c1 {
		t.Fatal("reissued with two thirds of the validity left")
	}
	clk.add(time.Hour + time.Minute)
	c2 := get()
	if c2 == c1 || !c2.Leaf.NotAfter.After(c1.Leaf.NotAfter) {
		t.Fatal("not reissued in the last third of the validity")
	}
	if !bytes.Equal(c2.Leaf.RawSubjectPublicKeyInfo, c1.Leaf.RawSubjectPublicKeyInfo) {
		t.Fatal("a reissued certificate has another key: keys rotate only with a new boot")
	}
	dial()
	if s := ch.Stats(); s.Verified != 1 || s.Cached != 1 {
		t.Fatalf("the reissued certificate: %+v, want it accepted from the cache", s)
	}
	// At the old certificate's end the new one is still being served.
	clk.add(59 * time.Minute)
	if get() != c2 {
		t.Fatal("reissued again too early")
	}
	dial()
}

func TestCertificatesNeedATLSKey(t *testing.T) {
	h := getHarness(t)
	e, err := attestation.New(context.Background(), h.backend, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attestedtls.NewCertificates(e, attestedtls.Options{}); !errors.Is(err, attestation.ErrNoTLSKey) {
		t.Fatalf("an enclave without a TLS key: %v", err)
	}
}

func TestListenHosts(t *testing.T) {
	for addr, want := range map[string][]string{
		"127.0.0.1:8443":       {"127.0.0.1"},
		"acds.example.org:443": {"acds.example.org"},
		"[::1]:8443":           {"::1"},
		":8443":                nil,
		"0.0.0.0:8443":         nil,
		"[::]:8443":            nil,
	} {
		got, err := attestedtls.ListenHosts(addr)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, want %v", addr, got, err, want)
		}
	}
	if _, err := attestedtls.ListenHosts("no port"); err == nil {
		t.Error("an address without a port was accepted")
	}
}

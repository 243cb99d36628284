package portal

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
)

func TestGuardAddresses(t *testing.T) {
	refused := []string{
		// IPv4
		"127.0.0.1", "127.255.255.254", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.1.1", "169.254.169.254", "100.64.0.1", "100.127.255.254", "100.100.100.200",
		"0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1",
		"192.0.0.192", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9",
		// IPv6
		"::1", "::", "fe80::1", "fe80::1%eth0", "fc00::1", "fd12:3456::1", "fd00:ec2::254", "ff02::1",
		"2001:db8::1", "fec0::1", "100::1",
		// IPv4-mapped, -compatible, NAT64 and 6to4 forms of refused IPv4
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:100.64.0.1", "::ffff:0.0.0.0",
		"::ffff:7f00:1", "::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b::10.0.0.1", "2002:7f00:1::1", "2002:c0a8:101::1",
		"64:ff9b::7f00:1", "2002:7f00:1::", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
		// Outside the IPv6 global unicast space, or not globally reachable
		// in it: IPv4-translated (SIIT), local-use NAT64 (whatever it
		// embeds), documentation (RFC 9637), SRv6, unassigned space.
		"::ffff:0:7f00:1", "::ffff:0:5db8:d822", "64:ff9b:1::808:808", "64:ff9b:1:ffff::1", "3fff::1", "5f00::1", "4000::1", "e000::1",
	}
	allowed := []string{"93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "192.169.0.1", "2606:4700::1111",
		"::ffff:93.184.216.34", "64:ff9b::808:808", "2002:5db8:d822::1"}
	strict, lax := Guard{}, Guard{AllowPrivate: true}
	for _, s := range refused {
		a := netip.MustParseAddr(s)
		err := strict.CheckAddr(a)
		var fe *ForbiddenError
		if !errors.Is(err, ErrForbidden) || !errors.As(err, &fe) || fe.Reason == "" {
			t.Errorf("CheckAddr(%s) = %v, want a ForbiddenError", s, err)
		}
		if err := lax.CheckAddr(a); err != nil {
			t.Errorf("AllowPrivate: CheckAddr(%s) = %v", s, err)
		}
		if err := strict.Control("tcp", netip.AddrPortFrom(a.WithZone(""), 443).String(), nil); !errors.Is(err, ErrForbidden) {
			t.Errorf("Control(%s) = %v, want forbidden", s, err)
		}
		if err := strict.AllowAddrPort(netip.AddrPortFrom(a, 443)); !errors.Is(err, ErrForbidden) {
			t.Errorf("AllowAddrPort(%s) = %v, want forbidden", s, err)
		}
	}
	for _, s := range allowed {
		if err := strict.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want allowed", s, err)
		}
	}
	if err := strict.Control("udp", "8.8.8.8:53", nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("Control(udp) = %v, want forbidden", err)
	}
}

func TestGuardURLs(t *testing.T) {
	refused := []string{
		"http://portal.example/fhir",          // not https
		"ftp://portal.example/",               // not https
		"https://127.0.0.1/fhir",              // loopback
		"https://[::1]:8443/fhir",             // loopback IPv6
		"https://[::ffff:127.0.0.1]/fhir",     // IPv4-mapped loopback
		"https://[::ffff:169.254.169.254]/",   // IPv4-mapped metadata
		"https://[fd00:ec2::254]/latest",      // AWS IPv6 metadata
		"https://169.254.169.254/latest/meta", // metadata
		"https://2130706433/fhir",             // decimal 127.0.0.1
		"https://0177.0.0.1/fhir",             // octal 127.0.0.1
		"https://0x7f.0.0.1/fhir",             // hex first part
		"https://0x7f000001/fhir",             // hex
		"https://017700000001/",               // octal whole
		"https://127.1/",                      // two-part
		"https://10.0.1/",                     // three-part
		"https://2852039166/",                 // decimal 169.254.169.254
		"https://0251.0376.0251.0376/",        // octal 169.254.169.254
		"https://metadata.google.internal/",   // metadata name
		"https://METADATA.google.internal./",  // metadata name
		"https://[fec0::1]/",                  // site-local
		"https://[::ffff:0:7f00:1]/",          // IPv4-translated loopback
		"https://localhost/fhir",              // loopback name
		"https://api.localhost./fhir",         // loopback name
	}
	for _, u := range refused {
		if _, err := (Guard{}).CheckURL(u); !errors.Is(err, ErrForbidden) {
			t.Errorf("CheckURL(%q) = %v, want forbidden", u, err)
		} else if errors.Is(err, ErrForbidden) && containsAny(err.Error(), "user:pw", ":pw@") {
			t.Errorf("CheckURL(%q) error quotes user information: %v", u, err)
		}
	}
	// Malformed is its own class (the caller's or the portal's mistake,
	// not a refused target), and the error never quotes the URL.
	for _, u := range []string{
		"https://user:pw@portal.example/fhir", // user information
		"ftp://user:pw@portal.example/",       // user information before the scheme rule
		"https:///fhir",                       // no host
		"https://portal.example:99999/",       // bad port
		"javascript:alert(1)",                 // opaque
		"portal.example/fhir",                 // relative
		"https://portal.example%zz/",          // not a URL
	} {
		_, err := (Guard{}).CheckURL(u)
		var ue *URLError
		if !errors.As(err, &ue) || !errors.Is(err, ErrMalformedURL) || errors.Is(err, ErrForbidden) {
			t.Errorf("CheckURL(%q) = %v, want a *URLError (ErrMalformedURL only)", u, err)
		} else if containsAny(err.Error(), "user:", "pw@", "portal.example") {
			t.Errorf("CheckURL(%q) error quotes the URL: %v", u, err)
		}
		if ProblemField(err) != "portalUrl" {
			t.Errorf("ProblemField(CheckURL(%q)) = %q, want portalUrl", u, ProblemField(err))
		}
	}
	for _, u := range []string{"https://portal.example/fhir", "https://93.184.216.34:8443/fhir", "https://1572395042/"} {
		if _, err := (Guard{}).CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want allowed", u, err)
		}
	}
	if _, err := (Guard{AllowHTTP: true}).CheckURL("http://portal.example/fhir"); err != nil {
		t.Errorf("AllowHTTP: %v", err)
	}
	if _, err := (Guard{AllowPrivate: true}).CheckURL("https://2130706433/fhir"); err != nil {
		t.Errorf("AllowPrivate: %v", err)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if len(x) > 0 && len(s) >= len(x) {
			for i := 0; i+len(x) <= len(s); i++ {
				if s[i:i+len(x)] == x {
					return true
				}
			}
		}
	}
	return false
}

func TestParseHostAddr(t *testing.T) {
	for in, want := range map[string]string{
		"2130706433": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "0x7f.0.0.1": "127.0.0.1", "127.1": "127.0.0.1",
		"127.0.1": "127.0.0.1", "0x7f000001": "127.0.0.1", "017700000001": "127.0.0.1", "1.2.3.4": "1.2.3.4",
		"[::1]": "::1", "10.0.0.1.": "10.0.0.1",
	} {
		a, err := ParseHostAddr(in)
		if err != nil || a.String() != want {
			t.Errorf("ParseHostAddr(%q) = %v, %v; want %s", in, a, err, want)
		}
	}
	for _, in := range []string{"portal.example", "1.2.3.4.5", "256.1.1.1", "4294967296", "0x", "1..2", "", "08.1.1.1", "1.2.65536"} {
		if a, err := ParseHostAddr(in); err == nil {
			t.Errorf("ParseHostAddr(%q) = %v, want not an address", in, a)
		}
	}
}

// rebinding answers a public address to the first lookup and loopback
// or metadata addresses afterwards.
type rebinding struct {
	mu    sync.Mutex
	calls int
	later []netip.Addr
}

func (r *rebinding) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return r.later, nil
}

// recorder is a dial function that records and refuses every address, so
// that the tests decide without sending a packet anywhere.
type recorder struct {
	mu     sync.Mutex
	dialed []string
}

var errRefusedByRecorder = errors.New("recorder refuses every dial")

func (r *recorder) dial(ctx context.Context, network, address string) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dialed = append(r.dialed, address)
	return nil, errRefusedByRecorder
}

func TestGuardedDialerStopsRebinding(t *testing.T) {
	for _, later := range [][]netip.Addr{
		{netip.MustParseAddr("127.0.0.1")},
		{netip.MustParseAddr("169.254.169.254")},
		{netip.MustParseAddr("::ffff:10.0.0.7"), netip.MustParseAddr("fd00:ec2::254")},
	} {
		res := &rebinding{later: later}
		rec := &recorder{}
		d := &GuardedDialer{Resolver: res, Dial: rec.dial}
		// The check at URL time sees the public address ...
		addrs, _ := res.LookupNetIP(context.Background(), "ip", "rebind.example")
		if err := (Guard{}).CheckAddr(addrs[0]); err != nil {
			t.Fatalf("first answer refused: %v", err)
		}
		// ... the connection sees the private one and is refused before
		// any dial.
		_, err := d.DialContext(context.Background(), "tcp", "rebind.example:443")
		if !errors.Is(err, ErrForbidden) {
			t.Errorf("rebinding to %v: error %v, want forbidden", later, err)
		}
		if len(rec.dialed) != 0 {
			t.Errorf("rebinding to %v: dialled %v", later, rec.dialed)
		}
	}
	// A public answer is dialled, by address.
	rec := &recorder{}
	d := &GuardedDialer{Resolver: &rebinding{}, Dial: rec.dial}
	if _, err := d.DialContext(context.Background(), "tcp", "public.example:443"); !errors.Is(err, errRefusedByRecorder) {
		t.Errorf("public: error %v", err)
	}
	if len(rec.dialed) != 1 || rec.dialed[0] != "93.184.216.34:443" {
		t.Errorf("public: dialled %v", rec.dialed)
	}
	// Numeric host forms are parsed, not resolved.
	rec = &recorder{}
	d = &GuardedDialer{Resolver: &rebinding{}, Dial: rec.dial}
	if _, err := d.DialContext(context.Background(), "tcp", "2130706433:443"); !errors.Is(err, ErrForbidden) || len(rec.dialed) != 0 {
		t.Errorf("decimal loopback: error %v, dialled %v", err, rec.dialed)
	}
}

// TestGuardControlAtConnect proves the net.Dialer hook runs on the
// resolved address: a loopback listener is refused by the strict guard
// and reached with AllowPrivate.
func TestGuardControlAtConnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	// "localhost" resolves to loopback: the name passes, the address not.
	if _, err := (Guard{}).NewDialer().DialContext(context.Background(), "tcp", "localhost:"+port); !errors.Is(err, ErrForbidden) {
		t.Errorf("strict dial to localhost: %v, want forbidden", err)
	}
	c, err := (Guard{AllowPrivate: true}).NewDialer().DialContext(context.Background(), "tcp", "localhost:"+port)
	if err != nil {
		t.Fatalf("AllowPrivate dial: %v", err)
	}
	c.Close()
	// Through an HTTP client: the strict transport never connects.
	hc := &http.Client{Transport: Guard{}.Transport(nil)}
	_, err = hc.Get("https://localhost:" + port + "/")
	if !errors.Is(err, ErrForbidden) {
		t.Errorf("strict transport: %v, want forbidden", err)
	}
}

// TestRedirectsRechecked: a portal that redirects to a loopback or
// metadata URL is refused.
func TestRedirectsRechecked(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://169.254.169.254/latest/meta-data", nil)
	if err := (Guard{}).CheckRedirect(req, nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("redirect to metadata: %v", err)
	}
	req, _ = http.NewRequest("GET", "http://portal.example/", nil)
	if err := (Guard{}).CheckRedirect(req, nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("redirect to http: %v", err)
	}
	req, _ = http.NewRequest("GET", "https://portal.example/", nil)
	if err := (Guard{}).CheckRedirect(req, make([]*http.Request, 10)); !errors.Is(err, ErrResponseInvalid) {
		t.Errorf("11th redirect: %v", err)
	}
}

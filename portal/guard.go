package portal

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Guard is the SSRF guard: it decides which portal URLs the service may
// fetch and which addresses it may connect to. The zero value is the
// strict production policy: https only, public unicast addresses only.
//
// The decision that matters is taken on the address actually dialled
// (Control, CheckAddr, DialContext), so a host name that resolves to a
// public address when the URL is checked and to a private one when the
// connection is made (DNS rebinding) is still refused. CheckURL adds an
// early, friendlier refusal for URLs that can never be allowed.
type Guard struct {
	// AllowHTTP permits plain http portal URLs. Zero: https only. Meant
	// for tests; an operator flag, never a request field.
	AllowHTTP bool
	// AllowPrivate permits every address: loopback, private, link-local,
	// CGNAT, metadata and the rest. Zero: only public unicast addresses.
	// For tests and for portals on the operator's own network
	// (`acds serve --allow-private-portals`).
	AllowPrivate bool
}

// blocked lists the IPv4 and IPv6 ranges a portal may not be in, with the
// reason given when an address falls in one. IPv4-mapped, IPv4-compatible,
// NAT64 and 6to4 IPv6 addresses are checked by the IPv4 address they
// carry as well.
var blocked = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified or this-network address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback address"},
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment (includes metadata services)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast address"},
	{netip.MustParsePrefix("::/128"), "unspecified address"},
	{netip.MustParsePrefix("::1/128"), "loopback address"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible address"},
	{netip.MustParsePrefix("100::/64"), "discard-only address"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation address"},
	{netip.MustParsePrefix("3fff::/20"), "documentation address"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignment"},
	{netip.MustParsePrefix("5f00::/16"), "segment routing (SRv6) address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata address"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "multicast address"},
}

// Prefixes that embed an IPv4 address, which is checked in turn, and the
// IPv6 global unicast space (RFC 4291 §2.4): every other IPv6 address that
// is not one of the embedding forms is refused.
var (
	nat64Prefix   = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local    = netip.MustParsePrefix("64:ff9b:1::/48")
	globalUnicast = netip.MustParsePrefix("2000::/3")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	ipv4Compat    = netip.MustParsePrefix("::/96")
	teredoPrefix  = netip.MustParsePrefix("2001::/32")
	errNotAnIP    = errors.New("not an IP address")
	maxRedirects  = 10
	guardDialWait = 10 * time.Second
)

// addrReason returns why a is refused, or "" when it is a public unicast
// address.
func addrReason(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid address"
	}
	a = a.WithZone("")
	if a.Is4In6() {
		if r := addrReason(a.Unmap()); r != "" {
			return "IPv4-mapped " + r
		}
		return ""
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64Prefix.Contains(a):
			if r := addrReason(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
				return "NAT64 " + r
			}
		case nat64Local.Contains(a):
			// RFC 8215: local-use translation, whose prefix length (and so
			// the position of the IPv4 address) the local network chooses;
			// not globally reachable.
			return "local-use NAT64 address"
		case sixToFour.Contains(a):
			if r := addrReason(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
				return "6to4 " + r
			}
		case ipv4Compat.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
			return "IPv4-compatible address"
		case teredoPrefix.Contains(a):
			return "Teredo address"
		}
	}
	for _, bl := range blocked {
		if bl.prefix.Contains(a) {
			return bl.reason
		}
	}
	if a.Is6() && !nat64Prefix.Contains(a) && !globalUnicast.Contains(a) {
		// Unassigned or reserved space (fec0::/10, ::ffff:0:0:0/96,
		// 4000::/3 …): nothing a portal can have.
		return "not a global unicast address"
	}
	if !a.IsGlobalUnicast() {
		return "not a global unicast address"
	}
	return ""
}

// CheckAddr returns a *ForbiddenError (wrapping ErrForbidden) when a is
// not an address a portal may have, and nil otherwise.
func (g Guard) CheckAddr(a netip.Addr) error {
	if g.AllowPrivate {
		if !a.IsValid() {
			return &ForbiddenError{Target: "(invalid)", Reason: "invalid address"}
		}
		return nil
	}
	if r := addrReason(a); r != "" {
		return &ForbiddenError{Target: a.String(), Reason: r}
	}
	return nil
}

// AllowAddrPort is CheckAddr for an address and port. Its signature fits
// notary.Config.AllowAddr, so that a notary dialling portals for the
// prover refuses what the guard refuses.
func (g Guard) AllowAddrPort(ap netip.AddrPort) error {
	return g.CheckAddr(ap.Addr())
}

// allowDialled is CheckAddr for the address a notary reports it dialled
// for host (prover.Dialer.AllowAddr). A refusal names the host, not the
// address, as GuardedDialer's does.
func (g Guard) allowDialled(host string, ap netip.AddrPort) error {
	err := g.CheckAddr(ap.Addr())
	var fe *ForbiddenError
	if errors.As(err, &fe) {
		return &ForbiddenError{Target: host, Reason: "it resolves to a refused address (" + fe.Reason + ")"}
	}
	return err
}

// Control checks the address of a connection about to be made. Its
// signature fits net.Dialer.Control: the dialer calls it with the
// resolved "ip:port" of every attempt, after name resolution and before
// the connect system call, so no packet reaches a refused address.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return &ForbiddenError{Target: address, Reason: "network " + network + " is not allowed"}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &ForbiddenError{Target: address, Reason: "dialled address is not ip:port", dialled: true}
	}
	err = g.CheckAddr(ap.Addr())
	var fe *ForbiddenError
	if errors.As(err, &fe) {
		fe.dialled = true // the connector reports it by the URL's host
	}
	return err
}

// NewDialer returns a net.Dialer whose Control is the guard, with a 10 s
// connect timeout. Use its DialContext as http.Transport.DialContext for
// a plain (not notarized) portal client.
func (g Guard) NewDialer() *net.Dialer {
	return &net.Dialer{Timeout: guardDialWait, Control: g.Control}
}

// CheckURL parses a portal URL and refuses what can never be fetched: a
// scheme other than https (or http with AllowHTTP), user information, a
// missing host, and a host that is an IP address in a refused range —
// including the numeric forms that inet_aton accepts (2130706433,
// 0177.0.0.1, 0x7f.1) — and the names localhost (with its subdomains)
// and metadata.google.internal. It does not resolve names: the address
// check that stops DNS rebinding happens when connecting. A URL that is
// malformed (not a URL, no host, user information, a bad port) is a
// *URLError (ErrMalformedURL); a well-formed one the guard refuses is a
// *ForbiddenError (ErrForbidden). It is the whole URL rule: the service's
// acceptance check (Connector.Admit) and every fetch call it, so both
// decide alike.
func (g Guard) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &URLError{Reason: "not a URL"}
	}
	if u.User != nil {
		// Never quote the URL: user information may hold a password.
		return nil, &URLError{Reason: "must not carry user information"}
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, &URLError{Reason: "not an absolute URL with a host"}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, &URLError{Reason: "bad port"}
		}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && g.AllowHTTP:
	default:
		return nil, &ForbiddenError{Target: u.Host, Reason: "scheme " + strconv.Quote(u.Scheme) + " is not allowed (https only)"}
	}
	host := u.Hostname()
	if a, err := ParseHostAddr(host); err == nil {
		if err := g.CheckAddr(a); err != nil {
			var fe *ForbiddenError
			if errors.As(err, &fe) {
				fe.Target = host
			}
			return nil, err
		}
	}
	if !g.AllowPrivate {
		h := strings.TrimSuffix(strings.ToLower(host), ".")
		switch {
		case h == "localhost" || strings.HasSuffix(h, ".localhost"):
			return nil, &ForbiddenError{Target: host, Reason: "loopback name"}
		case h == "metadata.google.internal":
			return nil, &ForbiddenError{Target: host, Reason: "cloud metadata name"}
		}
	}
	return u, nil
}

// ParseHostAddr parses a URL host that is an IP address: IPv6 (with or
// without brackets and zone), dotted-quad IPv4, and the other numeric
// forms that inet_aton and many resolvers accept — a single decimal,
// octal or hexadecimal number (2130706433, 017700000001, 0x7f000001) or
// two or three dotted parts (127.1, 127.0.1) in any of those bases. It
// returns an error when host is not numeric, i.e. a name to resolve.
func ParseHostAddr(host string) (netip.Addr, error) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a, nil
	}
	h = strings.TrimSuffix(h, ".")
	parts := strings.Split(h, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, errNotAnIP
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseInetNumber(p)
		if !ok {
			return netip.Addr{}, errNotAnIP
		}
		vals[i] = v
	}
	// The last part fills the remaining bytes; the others are one byte each.
	n := len(vals)
	for _, v := range vals[:n-1] {
		if v > 0xff {
			return netip.Addr{}, errNotAnIP
		}
	}
	if vals[n-1] >= 1<<(8*(5-n)) {
		return netip.Addr{}, errNotAnIP
	}
	var ip uint32
	for i, v := range vals[:n-1] {
		ip |= uint32(v) << (24 - 8*i)
	}
	ip |= uint32(vals[n-1])
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), nil
}

// parseInetNumber parses one inet_aton part: 0x-prefixed hexadecimal,
// 0-prefixed octal, or decimal.
func parseInetNumber(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	v, err := strconv.ParseUint(s, base, 32)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Resolver looks up the addresses of a host. *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// GuardedDialer resolves a host itself, checks every resolved address
// with the Guard, and dials only allowed addresses, by the address, so
// that the address checked is the address connected to. Its DialContext
// fits http.Transport.DialContext.
type GuardedDialer struct {
	Guard Guard
	// Resolver resolves host names. Nil means net.DefaultResolver.
	Resolver Resolver
	// Dial connects to one resolved "ip:port". Nil means Guard.NewDialer's
	// DialContext, which checks the address once more at connect time.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// DialContext connects to addr ("host:port") through the guard. When
// every resolved address is refused it returns a *ForbiddenError for the
// first (naming the host, not the address a name resolved to);
// otherwise it tries the allowed ones in order. A name that does not
// resolve and addresses that do not answer are an *Error wrapping
// ErrUnavailable, whose text names the host and the kind of failure but
// neither the resolver nor any address.
func (d *GuardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &ForbiddenError{Target: addr, Reason: "address is not host:port"}
	}
	var addrs []netip.Addr
	if a, err := ParseHostAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := d.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		addrs, err = r.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, unreachable("resolve", host, err)
		}
		if len(addrs) == 0 {
			return nil, &Error{Kind: ErrUnavailable, Op: "resolve", Err: &netError{msg: host + ": the name has no addresses"}}
		}
	}
	literal := isLiteral(host)
	dial := d.Dial
	if dial == nil {
		dial = d.Guard.NewDialer().DialContext
	}
	var firstRefusal, lastErr error
	for _, a := range addrs {
		if err := d.Guard.CheckAddr(a); err != nil {
			var fe *ForbiddenError
			if firstRefusal == nil && !literal && errors.As(err, &fe) {
				// Name the host, not the address it resolved to.
				err = &ForbiddenError{Target: host, Reason: "it resolves to a refused address (" + fe.Reason + ")"}
			}
			if firstRefusal == nil {
				firstRefusal = err
			}
			continue
		}
		c, err := dial(ctx, network, netip.AddrPortFrom(a.WithZone(""), mustPort(port)).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case errors.Is(lastErr, ErrForbidden): // Dial's own guard (Control)
		return nil, lastErr
	case lastErr != nil:
		return nil, unreachable("connect", host, lastErr)
	}
	return nil, firstRefusal
}

// isLiteral reports whether a URL host is an IP address in any notation.
func isLiteral(host string) bool {
	_, err := ParseHostAddr(host)
	return err == nil
}

func mustPort(p string) uint16 {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}

// CheckRedirect is an http.Client.CheckRedirect that re-checks every
// redirect target with CheckURL and stops after 10 redirects. A
// redirect from https to http is refused unless AllowHTTP.
func (g Guard) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return &Error{Kind: ErrResponseInvalid, Op: "redirect", Detail: "too many redirects"}
	}
	if _, err := g.CheckURL(req.URL.String()); err != nil {
		return err
	}
	return nil
}

// Transport returns a plain (not notarized) HTTP/1.1 transport whose
// connections are checked by the guard at connect time, with tlsConfig
// (nil means the defaults: system roots). It suits tests, baselines and
// deployments that fetch without MPC-TLS.
func (g Guard) Transport(tlsConfig *tls.Config) *http.Transport {
	var cfg *tls.Config
	if tlsConfig != nil {
		cfg = tlsConfig.Clone()
	}
	return &http.Transport{
		DialContext:         g.NewDialer().DialContext,
		TLSClientConfig:     cfg,
		TLSHandshakeTimeout: guardDialWait,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
}

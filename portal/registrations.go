package portal

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Operator SMART client registrations: Connector.Registrations from Go,
// or a registrations file (LoadRegistrations, `acds serve
// --registrations FILE`).

// ErrInvalidRegistration is wrapped by every *RegistrationError.
var ErrInvalidRegistration = errors.New("invalid SMART client registration")

// RegistrationError says which registration is wrong and why: Entry is
// the 1-based position in a registrations file (0 for a registration
// given from Go), Origin the entry's origin when it has one, Field the
// field at fault (the file's JSON name, or the Go field name). Its text
// never quotes a private key.
type RegistrationError struct {
	File   string // the registrations file, when read from one
	Entry  int
	Origin string
	Field  string
	Reason string
	Err    error // the cause (a file error), if any
}

// Error names the file, the entry (or origin) and the field, then the reason.
func (e *RegistrationError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	switch {
	case e.Entry > 0 && e.Origin != "":
		fmt.Fprintf(&b, "entry %d (%s): ", e.Entry, e.Origin)
	case e.Entry > 0:
		fmt.Fprintf(&b, "entry %d: ", e.Entry)
	case e.Origin != "":
		fmt.Fprintf(&b, "registration for %s: ", e.Origin)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns ErrInvalidRegistration and the cause.
func (e *RegistrationError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidRegistration}
	}
	return []error{ErrInvalidRegistration, e.Err}
}

// String describes the registration without its key or secret: the key's
// presence, algorithm and id, and whether it has a secret, only. Registrations print this way under %v and %+v,
// in log/slog (LogValue) and in JSON (MarshalJSON), so a logged
// Connector or Options carries no private key material.
func (r Registration) String() string {
	s := fmt.Sprintf("client %q redirect %q scope %q", r.ClientID, r.RedirectURI, r.Scope)
	if r.Key != nil {
		alg, _ := jwtAlg(r.Key.Public())
		s += fmt.Sprintf(" private_key_jwt %s", alg)
		if r.KeyID != "" {
			s += fmt.Sprintf(" kid %q", r.KeyID)
		}
	}
	if r.ClientSecret != "" {
		s += " client_secret"
	}
	if r.AuthMethod != "" {
		s += " " + r.AuthMethod
	}
	return s
}

// GoString is String, so %#v shows no key or secret either.
func (r Registration) GoString() string { return "portal.Registration{" + r.String() + "}" }

// LogValue makes log/slog print the registration without its key or secret.
func (r Registration) LogValue() slog.Value { return slog.StringValue(r.String()) }

// MarshalJSON encodes the registration in the registrations file's
// shape, with "privateKey": "[redacted]" in place of a key and
// "clientSecret": "[redacted]" in place of a secret.
func (r Registration) MarshalJSON() ([]byte, error) {
	v := struct {
		ClientID     string   `json:"clientId"`
		RedirectURI  string   `json:"redirectUri"`
		Scopes       []string `json:"scopes,omitempty"`
		PrivateKey   string   `json:"privateKey,omitempty"`
		KeyID        string   `json:"keyId,omitempty"`
		ClientSecret string   `json:"clientSecret,omitempty"`
		AuthMethod   string   `json:"tokenEndpointAuthMethod,omitempty"`
	}{ClientID: r.ClientID, RedirectURI: r.RedirectURI, Scopes: strings.Fields(r.Scope), KeyID: r.KeyID, AuthMethod: r.AuthMethod}
	if r.Key != nil {
		v.PrivateKey = "[redacted]"
	}
	if r.ClientSecret != "" {
		v.ClientSecret = "[redacted]"
	}
	return json.Marshal(v)
}

// Origin returns the registration key of a portal URL: its scheme and
// host, lower-cased, with the scheme's default port dropped
// ("https://portal.example", "https://portal.example:8443"). Path, query
// and fragment are ignored. It fails for URLs without an http or https
// scheme and a host, and for user information.
func Origin(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "https" && scheme != "http") || u.Hostname() == "" {
		return "", errors.New("want an https:// (or http://) URL with a host")
	}
	if u.User != nil {
		return "", errors.New("user information is not part of an origin")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" || scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + host + ":" + port, nil
}

// CheckRegistrations checks registrations given from Go: every key is an
// origin as Origin writes it, and every registration has a client id, an
// absolute redirect URI, at most one of a key and a client secret, an
// AuthMethod that fits what it holds (see Registration), when it
// has a key one that private_key_jwt can use (ECDSA P-256 or P-384, RSA of
// at least 2048 bits), and when it has a secret one an HTTP Basic header
// and a form can carry (3 to MaxClientSecretLen bytes of printable UTF-8
// without spaces at its ends). Errors are *RegistrationError, and
// never quote a key or a secret.
func CheckRegistrations(regs map[string]Registration) error {
	keys := make([]string, 0, len(regs))
	for k := range regs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, origin := range keys {
		if o, err := Origin(origin); err != nil || o != origin {
			reason := "not an origin"
			if err == nil {
				reason = fmt.Sprintf("write it as %s", o)
			}
			return &RegistrationError{Origin: origin, Field: "origin", Reason: reason, Err: err}
		}
		if err := regs[origin].check(); err != nil {
			err.Origin = origin
			return err
		}
	}
	return nil
}

// check checks one registration; the error's Field is the Go name.
func (r Registration) check() *RegistrationError {
	switch {
	case r.ClientID == "":
		return &RegistrationError{Field: "ClientID", Reason: "required"}
	case r.RedirectURI == "":
		return &RegistrationError{Field: "RedirectURI", Reason: "required"}
	case !absoluteURL(r.RedirectURI):
		return &RegistrationError{Field: "RedirectURI", Reason: "want an absolute URL (the connector intercepts it and never dials it)"}
	case strings.ContainsAny(r.Scope, "\"\\") || r.Scope != strings.Join(strings.Fields(r.Scope), " "):
		return &RegistrationError{Field: "Scope", Reason: "want scopes separated by single spaces"}
	case r.Key == nil && r.KeyID != "":
		return &RegistrationError{Field: "KeyID", Reason: "a key id without a key"}
	case r.Key != nil && r.ClientSecret != "":
		return &RegistrationError{Field: "ClientSecret", Reason: "a client secret and a private key: a client authenticates with one"}
	}
	if why := checkSecret(r.ClientSecret); why != "" {
		return &RegistrationError{Field: "ClientSecret", Reason: why}
	}
	if r.AuthMethod != "" {
		fits := map[string]bool{authNone: r.Key == nil && r.ClientSecret == "", authPrivateKeyJWT: r.Key != nil,
			authSecretBasic: r.ClientSecret != "", authSecretPost: r.ClientSecret != ""}
		if !fits[r.AuthMethod] {
			return &RegistrationError{Field: "AuthMethod", Reason: fmt.Sprintf("%q does not fit the registration: want none (no key, no secret), "+
				"private_key_jwt (a key), client_secret_basic or client_secret_post (a secret)", r.AuthMethod)}
		}
	}
	if r.Key != nil {
		if _, err := jwtAlg(r.Key.Public()); err != nil {
			return &RegistrationError{Field: "Key", Reason: "unusable for private_key_jwt", Err: err}
		}
	}
	return nil
}

// MaxClientSecretLen bounds a Registration's ClientSecret, in bytes.
const MaxClientSecretLen = 1024

// checkSecret says what is wrong with a client secret ("" for nothing),
// without quoting it.
func checkSecret(secret string) string {
	switch {
	case secret == "":
	case len(secret) > MaxClientSecretLen:
		return fmt.Sprintf("longer than %d bytes", MaxClientSecretLen)
	case !utf8.ValidString(secret):
		return "not UTF-8"
	case strings.ContainsFunc(secret, unicode.IsControl):
		return "it holds a control character"
	case strings.TrimSpace(secret) != secret:
		return "it starts or ends with a space"
	case len(secret) < 3:
		return "shorter than 3 bytes"
	}
	return ""
}

func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != "" && u.User == nil
}

// registrationEntry is one entry of a registrations file.
type registrationEntry struct {
	Origin           string   `json:"origin"`
	ClientID         string   `json:"clientId"`
	RedirectURI      string   `json:"redirectUri"`
	Scopes           []string `json:"scopes"`
	PrivateKeyFile   string   `json:"privateKeyFile"`
	KeyID            string   `json:"keyId"`
	ClientSecretFile string   `json:"clientSecretFile"`
	AuthMethod       string   `json:"tokenEndpointAuthMethod"`
}

// maxRegistrationsFile caps a registrations file and each key file.
const maxRegistrationsFile = 1 << 20

// LoadRegistrations reads a registrations file: a JSON array of entries
//
//	[{"origin": "https://portal.example",
//	  "clientId": "acds-prod",
//	  "redirectUri": "https://acds.example/smart/callback",
//	  "scopes": ["openid", "launch/patient", "patient/*.read"],
//	  "privateKeyFile": "keys/portal-example.pem",
//	  "keyId": "2026-01"},
//	 {"origin": "https://other.example",
//	  "clientId": "acds",
//	  "redirectUri": "https://acds.example/smart/callback",
//	  "clientSecretFile": "secrets/other-example",
//	  "tokenEndpointAuthMethod": "client_secret_post"}]
//
// origin, clientId and redirectUri are required; scopes defaults to
// DefaultScope; privateKeyFile (a PEM PKCS #8, SEC 1 "EC PRIVATE KEY" or
// PKCS #1 "RSA PRIVATE KEY" file) makes the client authenticate with
// private_key_jwt, keyId being the JWS "kid" the portal may want;
// clientSecretFile (a file holding the secret, one trailing newline
// allowed) with client_secret_basic or client_secret_post;
// tokenEndpointAuthMethod, when the portal registered the client with
// one method, names it (Registration.AuthMethod). Key and secret
// files are relative to the registrations file's directory and must be
// readable by their owner only; an entry has at most one of them.
// Unknown fields, duplicate origins and files over 1 MiB are refused.
// Every error is a *RegistrationError naming the file, the entry and the
// field; none quotes a key or a secret.
func LoadRegistrations(path string) (map[string]Registration, error) {
	data, err := readCapped(path)
	if err != nil {
		return nil, &RegistrationError{File: path, Reason: "cannot read it", Err: err}
	}
	regs, err := parseRegistrations(data, filepath.Dir(path))
	var re *RegistrationError
	if errors.As(err, &re) {
		re.File = path
	}
	return regs, err
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRegistrationsFile+1))
	if err == nil && len(data) > maxRegistrationsFile {
		err = fmt.Errorf("more than %d bytes", maxRegistrationsFile)
	}
	return data, err
}

// parseRegistrations parses a registrations file whose key files are
// relative to dir.
func parseRegistrations(data []byte, dir string) (map[string]Registration, error) {
	const shape = "want a JSON array of {origin, clientId, redirectUri, scopes?, privateKeyFile?, keyId?, clientSecretFile?, tokenEndpointAuthMethod?}"
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, &RegistrationError{Reason: shape, Err: err}
	}
	if dec.More() {
		return nil, &RegistrationError{Reason: "more than one JSON value"}
	}
	regs := make(map[string]Registration, len(raw))
	first := map[string]int{}
	for i, rawEntry := range raw {
		n := i + 1
		// Each entry alone, so that an error names the entry.
		var e registrationEntry
		ed := json.NewDecoder(bytes.NewReader(rawEntry))
		ed.DisallowUnknownFields()
		if err := ed.Decode(&e); err != nil {
			if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
				return nil, &RegistrationError{Entry: n, Field: strings.Trim(f, `"`), Reason: "unknown field; " + shape}
			}
			field := ""
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				field = te.Field
			}
			return nil, &RegistrationError{Entry: n, Field: field, Reason: shape, Err: err}
		}
		fail := func(field, reason string, err error) error {
			return &RegistrationError{Entry: n, Origin: e.Origin, Field: field, Reason: reason, Err: err}
		}
		if e.Origin == "" {
			return nil, fail("origin", "required", nil)
		}
		origin, err := Origin(e.Origin)
		if err != nil {
			return nil, fail("origin", "not an origin", err)
		}
		if u, _ := url.Parse(e.Origin); strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fail("origin", "an origin has no path, query or fragment (a FHIR base URL's origin is its scheme, host and port)", nil)
		}
		if j, dup := first[origin]; dup {
			return nil, fail("origin", fmt.Sprintf("entry %d registers %s already", j, origin), nil)
		}
		first[origin] = n
		for _, s := range e.Scopes {
			if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
				return nil, fail("scopes", fmt.Sprintf("%q is not a scope", s), nil)
			}
		}
		r := Registration{ClientID: e.ClientID, RedirectURI: e.RedirectURI, Scope: strings.Join(e.Scopes, " "), KeyID: e.KeyID, AuthMethod: e.AuthMethod}
		rel := func(p string) string {
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			return p
		}
		if e.PrivateKeyFile != "" && e.ClientSecretFile != "" {
			return nil, fail("clientSecretFile", "a client secret and a private key: a client authenticates with one", nil)
		}
		if e.PrivateKeyFile != "" {
			p := rel(e.PrivateKeyFile)
			if r.Key, err = loadClientKey(p); err != nil {
				return nil, fail("privateKeyFile", p, err)
			}
		}
		if e.ClientSecretFile != "" {
			p := rel(e.ClientSecretFile)
			if r.ClientSecret, err = loadClientSecret(p); err != nil {
				return nil, fail("clientSecretFile", p, err)
			}
		}
		if err := r.check(); err != nil {
			field := map[string]string{"ClientID": "clientId", "RedirectURI": "redirectUri", "Scope": "scopes", "KeyID": "keyId",
				"Key": "privateKeyFile", "ClientSecret": "clientSecretFile", "AuthMethod": "tokenEndpointAuthMethod"}[err.Field]
			return nil, fail(field, err.Reason, err.Err)
		}
		regs[origin] = r
	}
	return regs, nil
}

// readPrivate reads a file that only its owner may read (key and secret
// files), capped.
func readPrivate(path string) ([]byte, error) {
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("readable by group or others (mode %04o); chmod 600 it", fi.Mode().Perm())
		}
	}
	return readCapped(path)
}

// loadClientSecret reads a client secret file: the secret, with one
// trailing newline (LF or CRLF) allowed. Its errors never quote the
// file's contents.
func loadClientSecret(path string) (string, error) {
	data, err := readPrivate(path)
	if err != nil {
		return "", err
	}
	secret := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if secret == "" {
		return "", errors.New("empty")
	}
	if why := checkSecret(secret); why != "" {
		return "", errors.New(why)
	}
	return secret, nil
}

// loadClientKey reads a PEM private key file. Its errors never quote the
// file's contents.
func loadClientKey(path string) (crypto.Signer, error) {
	data, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	var key any
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM private key in it")
		}
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("a %s block that does not parse", b.Type) // the parser's text could quote key bytes
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("a %T is not a signing key", key)
		}
		return s, nil
	}
}

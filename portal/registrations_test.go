package portal

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeKey(t *testing.T, path, typ string, der []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRegistrations(t *testing.T) {
	dir := t.TempDir()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	p8, _ := x509.MarshalPKCS8PrivateKey(ec)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	writeKey(t, filepath.Join(dir, "keys", "a.pem"), "PRIVATE KEY", p8, 0o600)
	writeKey(t, filepath.Join(dir, "keys", "b.pem"), "EC PRIVATE KEY", sec1, 0o600)
	writeKey(t, filepath.Join(dir, "keys", "c.pem"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rk), 0o600)
	file := filepath.Join(dir, "registrations.json")
	if err := os.WriteFile(file, []byte(`[
		{"origin": "https://A.example", "clientId": "a", "redirectUri": "https://acds.example/cb", "privateKeyFile": "keys/a.pem", "keyId": "k1"},
		{"origin": "https://b.example:443/", "clientId": "b", "redirectUri": "https://acds.example/cb", "privateKeyFile": "keys/b.pem", "scopes": ["openid", "patient/*.read"]},
		{"origin": "https://c.example:8443", "clientId": "c", "redirectUri": "https://acds.example/cb", "privateKeyFile": "`+filepath.Join(dir, "keys", "c.pem")+`"},
		{"origin": "https://d.example", "clientId": "d", "redirectUri": "https://acds.example/cb"}
	]`), 0o600); err != nil {
		t.Fatal(err)
	}
	regs, err := LoadRegistrations(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckRegistrations(regs); err != nil {
		t.Errorf("CheckRegistrations refuses what LoadRegistrations made: %v", err)
	}
	want := map[string]string{"https://a.example": "a", "https://b.example": "b", "https://c.example:8443": "c", "https://d.example": "d"}
	if len(regs) != len(want) {
		t.Fatalf("%d registrations: %v", len(regs), regs)
	}
	for origin, id := range want {
		if regs[origin].ClientID != id {
			t.Errorf("%s: %+v", origin, regs[origin])
		}
	}
	if a := regs["https://a.example"]; a.KeyID != "k1" || !a.Key.Public().(*ecdsa.PublicKey).Equal(&ec.PublicKey) || a.Scope != "" {
		t.Errorf("a: %v", a)
	}
	if b := regs["https://b.example"]; b.Key == nil || b.Scope != "openid patient/*.read" {
		t.Errorf("b: %v", b)
	}
	if c := regs["https://c.example:8443"]; !c.Key.Public().(*rsa.PublicKey).Equal(&rk.PublicKey) {
		t.Errorf("c: %v", c)
	}
	if regs["https://d.example"].Key != nil {
		t.Error("d has a key")
	}

	// A registration prints, logs and marshals without its key.
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "reg", regs["https://a.example"], "conn", &Connector{Registrations: regs})
	js, _ := json.Marshal(regs)
	c := &Connector{Registrations: regs}
	for _, text := range []string{fmt.Sprintf("%v %+v %#v %s", regs, c, regs, regs["https://c.example:8443"]), logged.String(), string(js)} {
		for _, secret := range []string{ec.D.String(), rk.D.String(), rk.Primes[0].String(), fmt.Sprintf("%x", ec.D.Bytes())} {
			if strings.Contains(text, secret) {
				t.Fatalf("private key material in %q", text)
			}
		}
		if !strings.Contains(text, "k1") {
			t.Errorf("the registration is not described: %q", text)
		}
	}
}

func TestRegistrationErrors(t *testing.T) {
	dir := t.TempDir()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p8, _ := x509.MarshalPKCS8PrivateKey(ec)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	writeKey(t, filepath.Join(dir, "open.pem"), "PRIVATE KEY", p8, 0o644)
	writeKey(t, filepath.Join(dir, "small.pem"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(small), 0o600)
	writeKey(t, filepath.Join(dir, "cert.pem"), "CERTIFICATE", []byte("x"), 0o600)
	writeKey(t, filepath.Join(dir, "garbled.pem"), "PRIVATE KEY", p8[:40], 0o600)
	const ok = `"clientId": "a", "redirectUri": "https://acds.example/cb"`
	for _, tc := range []struct {
		name, file   string
		entry        int
		field, in    string // the error's Field, and a text it contains
		nothingAbout string // a text the error must not contain
	}{
		{"not JSON", `{"origin": 1}`, 0, "", "JSON array", ""},
		{"unknown field", `[{"origin": "https://a.example", ` + ok + `}, {"origin": "https://b.example", ` + ok + `, "secret": 1}]`, 2, "secret", "unknown field", ""},
		{"wrong type", `[{"origin": "https://a.example", "clientId": 7, "redirectUri": "https://x.example/cb"}]`, 1, "clientId", "JSON array", ""},
		{"two values", `[] []`, 0, "", "more than one", ""},
		{"no origin", `[{` + ok + `}]`, 1, "origin", "required", ""},
		{"origin not https", `[{"origin": "ftp://a.example", ` + ok + `}]`, 1, "origin", "not an origin", ""},
		{"origin with a path", `[{"origin": "https://a.example/fhir", ` + ok + `}]`, 1, "origin", "no path", ""},
		{"duplicate origin", `[{"origin": "https://a.example", ` + ok + `}, {"origin": "https://A.example:443", ` + ok + `}]`, 2, "origin", "entry 1", ""},
		{"no clientId", `[{"origin": "https://a.example", ` + ok + `}, {"origin": "https://b.example", "redirectUri": "https://x.example/cb"}]`, 2, "clientId", "required", ""},
		{"no redirectUri", `[{"origin": "https://a.example", "clientId": "a"}]`, 1, "redirectUri", "required", ""},
		{"relative redirect", `[{"origin": "https://a.example", "clientId": "a", "redirectUri": "/cb"}]`, 1, "redirectUri", "absolute", ""},
		{"bad scope", `[{"origin": "https://a.example", ` + ok + `, "scopes": ["openid launch"]}]`, 1, "scopes", "not a scope", ""},
		{"keyId without key", `[{"origin": "https://a.example", ` + ok + `, "keyId": "k"}]`, 1, "keyId", "without a key", ""},
		{"key readable by others", `[{"origin": "https://a.example", ` + ok + `, "privateKeyFile": "open.pem"}]`, 1, "privateKeyFile", "chmod 600", "PRIVATE"},
		{"missing key file", `[{"origin": "https://a.example", ` + ok + `, "privateKeyFile": "none.pem"}]`, 1, "privateKeyFile", "none.pem", ""},
		{"not a key", `[{"origin": "https://a.example", ` + ok + `, "privateKeyFile": "cert.pem"}]`, 1, "privateKeyFile", "no PEM private key", ""},
		{"garbled key", `[{"origin": "https://a.example", ` + ok + `, "privateKeyFile": "garbled.pem"}]`, 1, "privateKeyFile", "does not parse", fmt.Sprintf("%x", p8[:8])},
		{"small RSA key", `[{"origin": "https://a.example", ` + ok + `, "privateKeyFile": "small.pem"}]`, 1, "privateKeyFile", "2048", small.D.String()},
	} {
		file := filepath.Join(dir, "r.json")
		if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadRegistrations(file)
		var re *RegistrationError
		if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRegistration) {
			t.Errorf("%s: %v, want a *RegistrationError", tc.name, err)
			continue
		}
		if re.File != file || re.Entry != tc.entry || re.Field != tc.field || !strings.Contains(err.Error(), tc.in) ||
			tc.nothingAbout != "" && strings.Contains(err.Error(), tc.nothingAbout) {
			t.Errorf("%s: %q (entry %d, field %q), want entry %d, field %q, containing %q", tc.name, err, re.Entry, re.Field, tc.entry, tc.field, tc.in)
		}
	}
	if _, err := LoadRegistrations(filepath.Join(dir, "absent.json")); !errors.Is(err, ErrInvalidRegistration) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

func TestCheckRegistrations(t *testing.T) {
	good := Registration{ClientID: "a", RedirectURI: "https://acds.example/cb"}
	for name, regs := range map[string]map[string]Registration{
		"not an origin":  {"portal.example": good},
		"not normalized": {"https://Portal.example:443": good},
		"with a path":    {"https://portal.example/fhir": good},
		"no client id":   {"https://portal.example": {RedirectURI: "https://acds.example/cb"}},
		"no redirect":    {"https://portal.example": {ClientID: "a"}},
		"scope spacing":  {"https://portal.example": {ClientID: "a", RedirectURI: "https://acds.example/cb", Scope: " openid"}},
	} {
		if err := CheckRegistrations(regs); !errors.Is(err, ErrInvalidRegistration) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := CheckRegistrations(map[string]Registration{"https://portal.example:8443": good, "http://[::1]:8080": good}); err != nil {
		t.Error(err)
	}
	if err := CheckRegistrations(nil); err != nil {
		t.Error(err)
	}
}

// TestClientSecretRegistrations: a registrations file's clientSecretFile
// is read (one trailing newline dropped) from a file only its owner can
// read; a secret and a key together, an empty or unsendable secret are
// refused naming the field; a registration never prints, logs or
// marshals its secret.
func TestClientSecretRegistrations(t *testing.T) {
	const secret = "cl1ent-SECRET-value"
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("s", secret+"\r\n", 0o600)
	write("open", secret, 0o644)
	write("empty", "\n", 0o600)
	write("ctl", "abc\x00def", 0o600)
	write("spaced", " "+secret, 0o600)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p8, _ := x509.MarshalPKCS8PrivateKey(ec)
	writeKey(t, filepath.Join(dir, "k.pem"), "PRIVATE KEY", p8, 0o600)
	const ok = `"origin": "https://a.example", "clientId": "a", "redirectUri": "https://acds.example/cb"`
	regs, err := parseRegistrations([]byte(`[{`+ok+`, "clientSecretFile": "s"}]`), dir)
	if err != nil {
		t.Fatal(err)
	}
	r := regs["https://a.example"]
	if r.ClientSecret != secret || r.Key != nil {
		t.Fatalf("registration %v", r)
	}
	if err := CheckRegistrations(regs); err != nil {
		t.Error(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "reg", r, "conn", &Connector{Registrations: regs})
	js, _ := json.Marshal(regs)
	for _, text := range []string{fmt.Sprintf("%v %+v %#v %s", regs, r, r, r), logged.String(), string(js)} {
		if strings.Contains(text, secret) || strings.Contains(text, "SECRET") {
			t.Errorf("the secret in %q", text)
		}
		if !strings.Contains(text, "client_secret") && !strings.Contains(text, `"clientSecret":"[redacted]"`) {
			t.Errorf("the registration does not say it has a secret: %q", text)
		}
	}
	for name, entry := range map[string]string{
		"readable by others": `"clientSecretFile": "open"`, "empty": `"clientSecretFile": "empty"`,
		"control character": `"clientSecretFile": "ctl"`, "leading space": `"clientSecretFile": "spaced"`,
		"missing": `"clientSecretFile": "none"`, "with a key": `"clientSecretFile": "s", "privateKeyFile": "k.pem"`,
	} {
		_, err := parseRegistrations([]byte(`[{`+ok+`, `+entry+`}]`), dir)
		var re *RegistrationError
		if !errors.As(err, &re) || re.Field != "clientSecretFile" {
			t.Errorf("%s: %v, want an error on clientSecretFile", name, err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error quotes the secret: %v", name, err)
		}
	}
	for name, reg := range map[string]Registration{
		"key and secret": {ClientID: "a", RedirectURI: "https://acds.example/cb", ClientSecret: secret, Key: ec},
		"short secret":   {ClientID: "a", RedirectURI: "https://acds.example/cb", ClientSecret: "ab"},
		"newline":        {ClientID: "a", RedirectURI: "https://acds.example/cb", ClientSecret: secret + "\n"},
		"too long":       {ClientID: "a", RedirectURI: "https://acds.example/cb", ClientSecret: strings.Repeat("s", MaxClientSecretLen+1)},
	} {
		err := CheckRegistrations(map[string]Registration{"https://a.example": reg})
		var re *RegistrationError
		if !errors.As(err, &re) || re.Field != "ClientSecret" || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRegistrationAuthMethod: tokenEndpointAuthMethod must fit what the
// registration holds, and is kept.
func TestRegistrationAuthMethod(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "s"), []byte("a-secret"), 0o600)
	const ok = `"origin": "https://a.example", "clientId": "a", "redirectUri": "https://acds.example/cb"`
	regs, err := parseRegistrations([]byte(`[{`+ok+`, "clientSecretFile": "s", "tokenEndpointAuthMethod": "client_secret_post"}]`), dir)
	if err != nil || regs["https://a.example"].AuthMethod != "client_secret_post" {
		t.Fatalf("%v %v", regs, err)
	}
	for _, entry := range []string{`"tokenEndpointAuthMethod": "client_secret_basic"`, `"clientSecretFile": "s", "tokenEndpointAuthMethod": "private_key_jwt"`,
		`"clientSecretFile": "s", "tokenEndpointAuthMethod": "none"`, `"clientSecretFile": "s", "tokenEndpointAuthMethod": "tls_client_auth"`} {
		_, err := parseRegistrations([]byte(`[{`+ok+`, `+entry+`}]`), dir)
		var re *RegistrationError
		if !errors.As(err, &re) || re.Field != "tokenEndpointAuthMethod" {
			t.Errorf("%s: %v", entry, err)
		}
	}
}

package service

import (
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/portal"
)

// MaxOptionFileSize bounds the notary key and portal CA files Files reads.
const MaxOptionFileSize = 1 << 20

// Files names the files Options are read from (`acds serve` maps its
// flags onto them); an empty name is not read.
type Files struct {
	// NotaryKey is the external notary's public key (LoadNotaryKey).
	NotaryKey string
	// Registrations are the SMART client registrations
	// (portal.LoadRegistrations).
	Registrations string
	// PortalCA holds PEM certificates trusted as portal roots besides the
	// system's (LoadPortalCA).
	PortalCA string
	// TLSCACert and TLSCAKey are the operator CA that issues the attested
	// TLS certificates instead of self-signing them: the CA certificate
	// then its chain, and its private key (attestation.LoadIssuer: not
	// readable by group or others). Both or neither; only with TLS.
	TLSCACert, TLSCAKey string
}

// ErrTLSCA: TLSCACert and TLSCAKey were not given together, or without
// Options.TLS.
var ErrTLSCA = errors.New("service: the TLS CA certificate and key go together, and only with TLS")

// Load reads the files into o (NotaryKey, PortalRegistrations, PortalCA)
// and returns the operator CA of TLSCACert and TLSCAKey checked at now, or
// nil when neither is named; o.TLS must be set when they are (ErrTLSCA).
// Each error names the file it is about and never quotes a key.
func (f Files) Load(o *Options, now time.Time) (*attestation.Issuer, error) {
	var err error
	if f.NotaryKey != "" {
		if o.NotaryKey, err = LoadNotaryKey(f.NotaryKey); err != nil {
			return nil, err
		}
	}
	if f.Registrations != "" {
		if o.PortalRegistrations, err = portal.LoadRegistrations(f.Registrations); err != nil {
			return nil, err
		}
	}
	if f.PortalCA != "" {
		if o.PortalCA, err = LoadPortalCA(f.PortalCA); err != nil {
			return nil, err
		}
	}
	return f.tlsIssuer(o.TLS, now)
}

func (f Files) tlsIssuer(tls bool, now time.Time) (*attestation.Issuer, error) {
	switch {
	case f.TLSCACert == "" && f.TLSCAKey == "":
		return nil, nil
	case f.TLSCACert == "" || f.TLSCAKey == "":
		return nil, fmt.Errorf("%w: only one of them is named", ErrTLSCA)
	case !tls:
		return nil, fmt.Errorf("%w: TLS is off", ErrTLSCA)
	}
	ca, err := attestation.LoadIssuer(f.TLSCACert, f.TLSCAKey, now)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	return ca, nil
}

// LoadNotaryKey reads an external notary's public key file as
// notary.ParsePublicKey parses it (PEM "PUBLIC KEY", or the raw key in
// base64). Errors name the file.
func LoadNotaryKey(path string) (ed25519.PublicKey, error) {
	b, err := readOptionFile(path)
	if err != nil {
		return nil, fmt.Errorf("notary key: %w", err)
	}
	k, err := notary.ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("notary key %s: %w", path, err)
	}
	return k, nil
}

// LoadPortalCA reads a PEM file of portal root certificates, for
// Options.PortalCA; a file without a certificate is an error
// (ErrInvalidOptions). Errors name the file.
func LoadPortalCA(path string) ([]byte, error) {
	b, err := readOptionFile(path)
	if err != nil {
		return nil, fmt.Errorf("portal CA: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: portal CA %s: no PEM certificate in it", ErrInvalidOptions, path)
	}
	return b, nil
}

// readOptionFile reads a file of at most MaxOptionFileSize bytes.
func readOptionFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxOptionFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxOptionFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxOptionFileSize)
	}
	return b, nil
}

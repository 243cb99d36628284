package attestation_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/acds-project/acds/attestation"
)

// cborBundle is not a valid bundle, only bytes that start like one (a
// CBOR map) and hold the bytes that need each base64 alphabet's letters.
var cborBundle = []byte{0xa6, 0x01, 0xfb, 0xff, 0xfe, 0x3e, 0x3f, 0x00}

func TestReadBundleForms(t *testing.T) {
	std := base64.StdEncoding.EncodeToString(cborBundle)
	url := base64.URLEncoding.EncodeToString(cborBundle)
	if !strings.ContainsAny(std, "+/") || !strings.ContainsAny(url, "-_") {
		t.Fatalf("fixture does not exercise both alphabets: %s %s", std, url)
	}
	wrapped := std[:4] + "\n" + std[4:8] + "\r\n\t " + std[8:] + "\n"
	for name, in := range map[string]string{
		"raw CBOR":        string(cborBundle),
		"std padded":      std,
		"std unpadded":    strings.TrimRight(std, "="),
		"url padded":      url,
		"url unpadded":    strings.TrimRight(url, "="),
		"wrapped":         wrapped,
		"JSON string":     `"` + std + `"`,
		"prefixed":        "base64:" + url,
		"quoted prefixed": ` "base64:` + std + "\"\n",
	} {
		got, err := attestation.ReadBundle([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(got, cborBundle) {
			t.Errorf("%s: got %x, want %x", name, got, cborBundle)
		}
	}
}

func TestReadBundleRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []byte
		want error
	}{
		"empty":          {nil, attestation.ErrMalformed},
		"space":          {[]byte(" \n"), attestation.ErrMalformed},
		"quotes":         {[]byte(`""`), attestation.ErrMalformed},
		"not base64":     {[]byte("not a bundle!"), attestation.ErrMalformed},
		"mixed alphabet": {[]byte("ab+c-d"), attestation.ErrMalformed},
		"JSON object":    {[]byte(`{"a":1}`), attestation.ErrMalformed},
		"text too large": {bytes.Repeat([]byte("A"), attestation.MaxBundleTextSize+1), attestation.ErrTooLarge},
		"CBOR too large": {append([]byte{0xa1}, make([]byte, attestation.MaxBundleSize)...), attestation.ErrTooLarge},
		"decodes too large": {[]byte(base64.StdEncoding.EncodeToString(make([]byte, attestation.MaxBundleSize+1))),
			attestation.ErrTooLarge},
	} {
		if _, err := attestation.ReadBundle(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

// FuzzReadBundle: any input gives a bundle of at most MaxBundleSize bytes
// or ErrMalformed/ErrTooLarge, never a panic; base64 of any bytes reads
// back as them.
func FuzzReadBundle(f *testing.F) {
	f.Add([]byte(base64.StdEncoding.EncodeToString(cborBundle)), false)
	f.Add(cborBundle, false)
	f.Add([]byte(`"base64:AAA="`), true)
	f.Fuzz(func(t *testing.T, data []byte, encode bool) {
		if encode {
			if len(data) == 0 || len(data) > attestation.MaxBundleSize {
				return
			}
			text := base64.RawURLEncoding.EncodeToString(data)
			got, err := attestation.ReadBundle([]byte(text))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ReadBundle(base64 of %x) = %x, %v", data, got, err)
			}
			return
		}
		got, err := attestation.ReadBundle(data)
		if err != nil {
			if !errors.Is(err, attestation.ErrMalformed) && !errors.Is(err, attestation.ErrTooLarge) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if len(got) == 0 || len(got) > attestation.MaxBundleSize {
			t.Fatalf("ReadBundle gave %d bytes", len(got))
		}
	})
}

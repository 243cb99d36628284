package mpctls

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

// rfc8448 loads testdata/rfc8448.txt (name = hex lines).
func rfc8448(t testing.TB) map[string][]byte {
	t.Helper()
	f, err := os.Open("testdata/rfc8448.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(val), " ", ""))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v[strings.TrimSpace(name)] = b
	}
	return v
}

func eq(t *testing.T, name string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s = %x, want %x", name, got, want)
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestKeyScheduleRFC8448 walks the whole key schedule of RFC 8448 §3 and
// removes the protection of the server's real records with the derived
// keys.
func TestKeyScheduleRFC8448(t *testing.T) {
	v := rfc8448(t)
	b := must[[]byte](t)
	h := crypto.SHA256
	suite := must[Suite](t)(SuiteByID(0x1301))
	empty := sha256.Sum256(nil)

	early := b(hkdf.Extract(h.New, make([]byte, 32), nil))
	eq(t, "early_secret", early, v["early_secret"])
	derived := b(DeriveSecret(h, early, "derived", empty[:]))
	eq(t, "derived_early", derived, v["derived_early"])
	hs := b(hkdf.Extract(h.New, v["ecdhe"], derived))
	eq(t, "handshake_secret", hs, v["handshake_secret"])

	sh := v["server_hello_record"][HeaderLen:]
	tr := sha256.New()
	tr.Write(v["client_hello"])
	tr.Write(sh)
	eq(t, "hs_hash", tr.Sum(nil), v["hs_hash"])
	eq(t, "c_hs_traffic", b(DeriveSecret(h, hs, "c hs traffic", v["hs_hash"])), v["c_hs_traffic"])
	sHS := b(DeriveSecret(h, hs, "s hs traffic", v["hs_hash"]))
	eq(t, "s_hs_traffic", sHS, v["s_hs_traffic"])
	derivedHS := b(DeriveSecret(h, hs, "derived", empty[:]))
	eq(t, "derived_hs", derivedHS, v["derived_hs"])
	master := b(hkdf.Extract(h.New, make([]byte, 32), derivedHS))
	eq(t, "master_secret", master, v["master_secret"])

	key, iv, err := TrafficKey(suite, sHS)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "s_hs_key", key, v["s_hs_key"])
	eq(t, "s_hs_iv", iv, v["s_hs_iv"])
	ckey, civ, _ := TrafficKey(suite, v["c_hs_traffic"])
	eq(t, "c_hs_key", ckey, v["c_hs_key"])
	eq(t, "c_hs_iv", civ, v["c_hs_iv"])
	eq(t, "s_finished_key", b(HKDFExpandLabel(h, sHS, "finished", nil, 32)), v["s_finished_key"])

	// Decrypt the server's protected flight and check its Finished.
	flight := Record{Dir: ServerToClient, Seq: 2, Type: RecordApplicationData, Version: 0x0303, Raw: v["server_flight_record"]}
	op := must[*Opener](t)(NewOpener13(suite, sHS))
	ct, pt, err := op.Open(nil, 0, flight)
	if err != nil || ct != RecordHandshake {
		t.Fatalf("open flight: type %d, %v", ct, err)
	}
	var finOff int
	for off := 0; off < len(pt); {
		n := 4 + (int(pt[off+1])<<16 | int(pt[off+2])<<8 | int(pt[off+3]))
		if pt[off] == 20 { // Finished
			finOff = off
		}
		off += n
	}
	// The flight's CertificateVerify (RSA-PSS) verifies over the RFC's
	// transcript with the RFC's certificate.
	flightStream := &hsStream{recs: []Record{flight}, opener: op}
	ee := must[[]byte](t)(flightStream.expect(typeEncryptedExt, "ee"))
	certMsg := must[[]byte](t)(flightStream.expect(typeCertificate, "certificate"))
	certs, err := parseCertificate13(certMsg)
	if err != nil || len(certs) != 1 {
		t.Fatalf("certificate: %v", err)
	}
	cvMsg := must[[]byte](t)(flightStream.expect(typeCertificateVerify, "certificate verify"))
	cvTr := sha256.New()
	cvTr.Write(v["client_hello"])
	cvTr.Write(sh)
	cvTr.Write(ee)
	cvTr.Write(certMsg)
	scheme, sig, err := parseSigned(cvMsg[4:], "cv")
	if err != nil || scheme != 0x0804 {
		t.Fatalf("certificate verify: %#04x %v", scheme, err)
	}
	signed := append(bytes.Repeat([]byte{0x20}, 64), "TLS 1.3, server CertificateVerify\x00"...)
	if err := verifySignature(certs[0].PublicKey, scheme, cvTr.Sum(signed), sig, true); err != nil {
		t.Fatalf("RFC 8448 CertificateVerify: %v", err)
	}
	if err := verifySignature(certs[0].PublicKey, scheme, cvTr.Sum(append(signed, 0)), sig, true); err == nil {
		t.Fatal("CertificateVerify over another transcript verified")
	}

	tr.Write(pt[:finOff])
	mac := b(finishedMAC(h, sHS, tr.Sum(nil)))
	eq(t, "server finished", pt[finOff+4:], mac)
	tr.Write(pt[finOff:])
	eq(t, "ap_hash", tr.Sum(nil), v["ap_hash"])
	eq(t, "c_ap_traffic", b(DeriveSecret(h, master, "c ap traffic", v["ap_hash"])), v["c_ap_traffic"])
	sAP := b(DeriveSecret(h, master, "s ap traffic", v["ap_hash"]))
	eq(t, "s_ap_traffic", sAP, v["s_ap_traffic"])
	eq(t, "exp_master", b(DeriveSecret(h, master, "exp master", v["ap_hash"])), v["exp_master"])
	key, iv, _ = TrafficKey(suite, sAP)
	eq(t, "s_ap_key", key, v["s_ap_key"])
	eq(t, "s_ap_iv", iv, v["s_ap_iv"])

	// The application epoch: NewSessionTicket (seq 0) then data (seq 1).
	ap := must[*Opener](t)(NewOpener13(suite, sAP))
	nst := Record{Dir: ServerToClient, Seq: 3, Type: RecordApplicationData, Version: 0x0303, Raw: v["server_nst_record"]}
	if ct, pt, err := ap.Open(nil, 0, nst); err != nil || ct != RecordHandshake || pt[0] != 4 {
		t.Fatalf("new session ticket: %d %v", ct, err)
	}
	app := Record{Dir: ServerToClient, Seq: 4, Type: RecordApplicationData, Version: 0x0303, Raw: v["server_app_record"]}
	ct, pt, err = ap.Open(nil, 1, app)
	if err != nil || ct != RecordApplicationData {
		t.Fatalf("application data: %d %v", ct, err)
	}
	want := make([]byte, 50)
	for i := range want {
		want[i] = byte(i)
	}
	eq(t, "application data", pt, want)
	// The wrong sequence number or the wrong epoch's key fails.
	if _, _, err := ap.Open(nil, 0, app); !errors.Is(err, ErrDecrypt) {
		t.Errorf("wrong seq: %v", err)
	}
	if _, _, err := op.Open(nil, 1, app); !errors.Is(err, ErrDecrypt) {
		t.Errorf("wrong key: %v", err)
	}
}

func TestHKDFExpandLabelInfo(t *testing.T) {
	// RFC 8448 gives the HkdfLabel of the key expansion; HKDF-Expand with
	// that info must match ours.
	v := rfc8448(t)
	got, _ := HKDFExpandLabel(crypto.SHA256, v["s_hs_traffic"], "key", nil, 16)
	want, _ := hkdf.Expand(sha256.New, v["s_hs_traffic"], string(v["key_info"]), 16)
	eq(t, "key", got, want)
}

func TestNextTrafficSecret(t *testing.T) {
	suite, _ := SuiteByID(0x1301)
	v := rfc8448(t)
	next, err := NextTrafficSecret(suite, v["s_ap_traffic"])
	if err != nil {
		t.Fatal(err)
	}
	want, _ := HKDFExpandLabel(crypto.SHA256, v["s_ap_traffic"], "traffic upd", nil, 32)
	eq(t, "next", next, want)
	if bytes.Equal(next, v["s_ap_traffic"]) {
		t.Fatal("key update did not change the secret")
	}
	if _, err := NextTrafficSecret(suite, next[:31]); !errors.Is(err, ErrDecrypt) {
		t.Fatal(err)
	}
}

package mpctls

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"testing"
	"time"
)

// BenchmarkVerifyPresentation verifies presentations of a real crypto/tls
// TLS 1.3 (AES-128-GCM) session whose whole response is disclosed. In the
// same run it measures the baseline: the bare cryptographic work on the
// same records (one SHA-256 over each record and one AEAD open), and
// reports
//
//	ms/verify      wall time of one VerifyPresentation
//	x-baseline     that time divided by the baseline's
//	x-goal         that time divided by the goal, 2 ms + 2 ms/MB
//	%-pres-overhead  encoded presentation size beyond the plaintext, in %
//	stmt-bytes     size of the signed statement
func BenchmarkVerifyPresentation(b *testing.B) {
	key := testKey(b, 21)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	for _, mb := range []int{1, 10} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			resp := make([]byte, mb<<20)
			rand.Read(resp)
			cap := goCase{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256, ecdsa: true}.capture(b, resp)
			hs, stmt := notarize(b, cap, key)
			secret := serverSecret(b, cap, hs)
			p, err := BuildPresentation(cap.records, stmt, secret, []uint64{hs.ServerProtectedFrom}, serverSeqs(cap, hs.ServerProtectedFrom))
			if err != nil {
				b.Fatal(err)
			}
			enc, err := p.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			suite, _ := SuiteByID(hs.CipherSuite)
			op, _ := NewOpener13(suite, secret)
			baseline := func() {
				buf := make([]byte, 0, len(resp)+len(p.Records)*32)
				for _, r := range p.Records {
					sha256.Sum256(r.Raw)
					rec, _ := recordFromRaw(ServerToClient, r.Seq, r.Raw)
					_, out, err := op.Open(buf, r.Seq-hs.ServerProtectedFrom, rec)
					if err != nil {
						b.Fatal(err)
					}
					buf = out
				}
			}
			b.SetBytes(int64(len(resp)))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				d, err := VerifyPresentation(stmt, p, trusted)
				if err != nil || len(d.Records) != len(p.Records) {
					b.Fatal(err)
				}
			}
			verify := time.Since(start)
			b.StopTimer()
			bstart := time.Now()
			for i := 0; i < b.N; i++ {
				baseline()
			}
			base := time.Since(bstart)
			per := float64(verify.Nanoseconds()) / float64(b.N) / 1e6
			goal := 2 + 2*float64(len(resp))/1e6
			b.ReportMetric(per, "ms/verify")
			b.ReportMetric(float64(verify)/float64(base), "x-baseline")
			b.ReportMetric(per/goal, "x-goal")
			b.ReportMetric(float64(len(enc)-len(resp))/float64(len(resp))*100, "%-pres-overhead")
			b.ReportMetric(float64(len(stmt)), "stmt-bytes")
		})
	}
}

// BenchmarkTranscriptAdd measures the notary's per-record cost against
// the baseline of hashing the same bytes once with SHA-256.
func BenchmarkTranscriptAdd(b *testing.B) {
	frag := make([]byte, 1<<14)
	r := rec(ServerToClient, 0, RecordApplicationData, frag)
	b.SetBytes(int64(len(r.Raw)))
	start := time.Now()
	var tr Transcript
	tr.Add(rec(ClientToServer, 0, RecordHandshake, []byte{1}))
	for i := 0; i < b.N; i++ {
		r.Seq = uint64(i)
		if err := tr.Add(r); err != nil {
			b.Fatal(err)
		}
	}
	add := time.Since(start)
	b.StopTimer()
	bstart := time.Now()
	for i := 0; i < b.N; i++ {
		sha256.Sum256(r.Raw)
	}
	b.ReportMetric(float64(add)/float64(time.Since(bstart)), "x-sha256")
}

package prover

import (
	"bytes"
	"crypto/tls"
	"errors"
	"testing"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

func serverRecords(r *Result) []mpctls.Record {
	var out []mpctls.Record
	for _, rec := range r.Records {
		if rec.Dir == mpctls.ServerToClient {
			out = append(out, rec)
		}
	}
	return out
}

func flipBit(r mpctls.Record, i int) mpctls.Record {
	r.Raw = bytes.Clone(r.Raw)
	r.Raw[i] ^= 0x01
	return r
}

// TestOwnCheckRejectsTampering feeds the prover's server-record check
// records from a real session with one bit flipped in each protected
// record in turn, a dropped record, a duplicated one, two swapped ones,
// and a wrong key; every case must fail.
func TestOwnCheckRejectsTampering(t *testing.T) {
	ca := notarytest.NewCA(t)
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "tamper.test")}, MaxVersion: v}, servePayload())
			fr := fetch(t, n, ca.Pool(), "tamper.test", port, nil, "/a", "/payload?n=50000")
			r := fr.results[0]
			check := checkServer12
			if v == tls.VersionTLS13 {
				check = checkServer13
			}
			server := serverRecords(r)
			if _, err := check(r.keys, server); err != nil {
				t.Fatalf("genuine records: %v", err)
			}
			first := r.epochs[0]
			if v == tls.VersionTLS13 {
				first = 0
				for server[first].Type != mpctls.RecordApplicationData {
					first++
				}
			}
			for i := int(first); i < len(server); i++ {
				for _, pos := range []int{0, 4, mpctls.HeaderLen, len(server[i].Raw) - 1} {
					bad := append([]mpctls.Record(nil), server...)
					bad[i] = flipBit(bad[i], pos)
					if _, err := check(r.keys, bad); err == nil {
						t.Fatalf("bit flip at byte %d of server record %d accepted", pos, i)
					}
				}
			}
			last := len(server) - 1
			mutations := map[string][]mpctls.Record{
				"dropped":    append(append([]mpctls.Record(nil), server[:last-1]...), server[last]),
				"duplicated": append(append([]mpctls.Record(nil), server...), server[last]),
				"swapped":    append(append(append([]mpctls.Record(nil), server[:last-1]...), server[last]), server[last-1]),
			}
			for name, recs := range mutations {
				if _, err := check(r.keys, recs); !errors.Is(err, mpctls.ErrDecrypt) {
					t.Errorf("%s record: %v, want ErrDecrypt", name, err)
				}
			}
			wrong := r.keys
			if v == tls.VersionTLS13 {
				wrong.appSecret0 = bytes.Clone(wrong.appSecret0)
				wrong.appSecret0[0] ^= 1
			} else {
				wrong.key12 = bytes.Clone(wrong.key12)
				wrong.key12[0] ^= 1
			}
			if _, err := check(wrong, server); !errors.Is(err, mpctls.ErrDecrypt) {
				t.Errorf("wrong key: %v, want ErrDecrypt", err)
			}
		})
	}
}

package server_test

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
)

// BenchmarkWebhookDelivery measures, with the default delivery timings
// (poll 1 s, backoff from 1 s doubling, jittered), how long after a
// request completes a receiver that fails its first three attempts gets
// the successful fourth, and how long the first attempt takes to come
// (the baseline: a receiver that accepts at once). It reports p50 and
// max in ms over the iterations.
//
//	go test -run '^$' -bench BenchmarkWebhookDelivery -benchtime 5x ./server/
func BenchmarkWebhookDelivery(b *testing.B) {
	for _, c := range []struct {
		name  string
		fails int
	}{{"first-attempt", 0}, {"fails-3-times", 3}} {
		b.Run(c.name, func(b *testing.B) {
			encl := newRealEnclave(b)
			var n int
			rc := newReceiver(b, func(int) int {
				n++
				if n%(c.fails+1) != 0 {
					return http.StatusServiceUnavailable
				}
				return http.StatusOK
			})
			o := fastWebhooks(rc)
			o.MinBackoff, o.MaxBackoff, o.Poll = 0, 0, 0 // the defaults
			ts := benchServer(b, func(cfg *server.Config) {
				cfg.Enclave = server.AttestationEnclave(encl.enclave, nil)
				cfg.Verifier = server.Verify(encl.verifier)
				cfg.Webhooks = o
			})
			var s acds.Session
			benchCall(b, ts, "POST", "/v1/auth/anon", "", struct{}{}, &s)
			var lat []time.Duration
			attempts := 0
			b.ResetTimer()
			for range b.N {
				// Requests do not end in step with the dispatcher's poll.
				time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
				var acc acds.Accepted
				benchCall(b, ts, "POST", "/v1/process", s.Token, map[string]any{"data": processBody("")["data"], "outputFormat": "fhir_r4", "callbackUrl": rc.ts.URL}, &acc)
				var rec acds.Request
				for {
					benchCall(b, ts, "GET", "/v1/requests/"+acc.RequestID+"?wait=30", s.Token, nil, &rec)
					if rec.Done() {
						break
					}
				}
				// The long-poll answers as soon as the outcome is stored
				// (the record's times have whole-second precision).
				completed := time.Now()
				for {
					select {
					case h := <-rc.got:
						attempts++
						if h.status != http.StatusOK {
							continue
						}
						lat = append(lat, h.at.Sub(completed))
					case <-time.After(time.Minute):
						b.Fatal("no delivery within a minute")
					}
					break
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			b.ReportMetric(float64(attempts)/float64(b.N), "attempts/op")
			b.ReportMetric(0, "ns/op")
		})
	}
}

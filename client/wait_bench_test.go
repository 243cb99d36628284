package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// BenchmarkWait measures, for a request whose processing takes 30 ms, the
// time from POST /v1/process to Wait's return with long-polling, and in
// the same run with polling every 20 ms doubling (the baseline: Wait
// before long-polling, as the demo configured it). It reports both, their
// ratio and the GETs each sends.
func BenchmarkWait(b *testing.B) {
	const work = 30 * time.Millisecond
	var log getLog
	base := newServer(b, func(c *server.Config) {
		c.Pipeline = &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
			time.Sleep(work)
			return nil
		}}
	}, log.wrap)
	ctx := context.Background()
	run := func(opts *client.Options) (time.Duration, int) {
		c, err := client.New(base, opts)
		if err != nil {
			b.Fatal(err)
		}
		s, err := c.Anon(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		c = c.WithToken(s.Token)
		n := len(log.get())
		start := time.Now()
		acc, err := c.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(bundle), OutputFormat: acds.OutputFHIRR4})
		if err != nil {
			b.Fatal(err)
		}
		r, err := c.Wait(ctx, acc.RequestID)
		if err != nil || r.Status != acds.StatusCompleted {
			b.Fatalf("Wait = %+v, %v", r, err)
		}
		return time.Since(start), len(log.get()) - n
	}
	var long, poll time.Duration
	var longGets, pollGets int
	b.ResetTimer()
	for range b.N {
		d, g := run(nil)
		long += d
		longGets += g
		d, g = run(&client.Options{LongPoll: -1, PollInterval: 20 * time.Millisecond})
		poll += d
		pollGets += g
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
	b.ReportMetric(ms(long), "longpoll-ms/op")
	b.ReportMetric(ms(poll), "poll-ms/op")
	b.ReportMetric(float64(poll)/float64(long), "poll/longpoll")
	b.ReportMetric(float64(longGets)/float64(b.N), "longpoll-GETs/op")
	b.ReportMetric(float64(pollGets)/float64(b.N), "poll-GETs/op")
	b.ReportMetric(0, "ns/op")
}

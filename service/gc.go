package service

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// gcHeapFloor is the least room the garbage collector's heap goal leaves
// above the live heap (see tuneGC).
const gcHeapFloor = 64 << 20

// gcTuneEvery is how often tuneGC reads the live heap.
const gcTuneEvery = 250 * time.Millisecond

// tuneGC sets the garbage collector's GOGC percentage every gcTuneEvery
// from the live heap of the last cycle, so that the heap goal is
// max(2 × live, live + floor): the default GOGC=100 once the live heap
// is floor or more, and room for floor bytes of garbage below that.
//
// The server's live heap is small (a few MB), while each accepted
// request allocates about as much as its body several times over (the
// FHIR check's model, the read body, the compressed input): with GOGC=100
// the collector would run after every few MB of allocation, many times a
// second under load. The floor makes cycles several times rarer. Memory
// stays bounded: the heap grows to at most floor bytes more than with
// GOGC=100, never to a multiple of a large live heap; GOMEMLIMIT still
// applies on top. tuneGC returns, restoring GOGC=100, when ctx ends.
func tuneGC(ctx context.Context, floor uint64) {
	defer debug.SetGCPercent(100)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(gcTuneEvery)
	defer t.Stop()
	for {
		metrics.Read(sample)
		var live uint64
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = sample[0].Value.Uint64()
		}
		// Set at every tick (it costs a lock), not only on a change:
		// another tuneGC in the same process (tests run several servers)
		// may have restored the default as it returned.
		debug.SetGCPercent(gcPercentFor(live, floor))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gcPercentFor is the GOGC percentage that makes the heap goal
// max(2 × live, live + floor), in steps of 25 (so that small changes of
// the live heap do not reset it every time), and at most 10000. A live
// heap not yet measured (0, before the first cycle) counts as 4 MiB.
func gcPercentFor(live, floor uint64) int {
	if live == 0 {
		live = 4 << 20
	}
	pct := floor * 100 / live
	pct -= pct % 25
	return int(min(max(pct, 100), 10000))
}

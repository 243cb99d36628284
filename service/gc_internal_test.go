package service

import (
	"context"
	"runtime/metrics"
	"testing"
	"time"
)

// TestGCPercentFor: the heap goal live × (1 + pct/100) is live + floor
// (within a step) for a small live heap and 2 × live from floor on.
func TestGCPercentFor(t *testing.T) {
	const floor = 64 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 1600},          // not yet measured: 4 MiB
		{4 << 20, 1600},    // goal 68 MiB
		{6 << 20, 1050},    // 1066 rounded down to a step of 25
		{32 << 20, 200},    // goal 96 MiB
		{64 << 20, 100},    // the default from the floor on
		{1 << 30, 100},     // never below the default
		{1 << 10, 10000},   // capped
		{floor / 3, 300},   // goal 4 × live = live + floor
		{floor / 2, 200},   // goal 3 × live
		{floor - 1, 100},   // 100.0000x rounds down to the default
		{floor * 2, 100},   //
		{floor / 10, 1000}, //
	} {
		if got := gcPercentFor(tc.live, floor); got != tc.want {
			t.Errorf("gcPercentFor(%d, %d) = %d, want %d", tc.live, uint64(floor), got, tc.want)
		}
	}
}

// TestTuneGCRestoresDefault: tuneGC raises GOGC while the live heap is
// small, and leaves GOGC=100 behind when its context ends.
func TestTuneGCRestoresDefault(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tuneGC(ctx, 1<<40) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if gogc() > 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tuneGC did not raise GOGC above 100")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if pct := gogc(); pct != 100 {
		t.Fatalf("GOGC is %d after tuneGC returned, want 100", pct)
	}
}

// gogc reads the GOGC percentage in effect.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

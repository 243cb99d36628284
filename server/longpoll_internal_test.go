package server

import (
	"net/url"
	"strconv"
	"testing"
)

// TestWaitersReplacedEntry: a waiter released after its entry was woken
// and replaced by a newer waiter's entry leaves the newer one alone.
func TestWaitersReplacedEntry(t *testing.T) {
	w := newWaiters()
	w.started("r1")
	a, releaseA, ok := w.subscribe("r1", "o1")
	if !ok {
		t.Fatal("subscribe refused")
	}
	w.stopped("r1")
	select {
	case <-a:
	default:
		t.Fatal("stopped did not wake the waiter")
	}
	b, releaseB, ok := w.subscribe("r1", "o2")
	if !ok || b == a {
		t.Fatal("a woken entry was reused")
	}
	releaseA()
	if total, ids := w.size(); total != 1 || ids != 1 {
		t.Fatalf("after the old waiter left: %d waiters, %d ids; want 1, 1", total, ids)
	}
	w.started("r1")
	w.stopped("r1")
	select {
	case <-b:
	default:
		t.Fatal("the newer waiter was not woken")
	}
	releaseB()
	if total, ids := w.size(); total != 0 || ids != 0 || len(w.perOwner) != 0 || len(w.running) != 0 {
		t.Fatalf("left behind: %d waiters, %d ids, owners %v, running %v", total, ids, w.perOwner, w.running)
	}
}

// TestWaitersBounds: one owner holds at most maxWaitersPerOwner waiters.
func TestWaitersBounds(t *testing.T) {
	w := newWaiters()
	var releases []func()
	for i := range maxWaitersPerOwner {
		_, r, ok := w.subscribe(strconv.Itoa(i), "o1")
		if !ok {
			t.Fatalf("waiter %d refused", i)
		}
		releases = append(releases, r)
	}
	if _, _, ok := w.subscribe("x", "o1"); ok {
		t.Fatal("a waiter beyond the per-owner bound was accepted")
	}
	_, r, ok := w.subscribe("x", "o2")
	if !ok {
		t.Fatal("another owner was refused")
	}
	r()
	releases[0]()
	if _, r, ok := w.subscribe("x", "o1"); !ok {
		t.Fatal("a released slot was not reusable")
	} else {
		r()
	}
}

// FuzzParseWait: any query gives either a wait from 1 to 30 or a problem
// naming a parameter, never both, never a panic.
func FuzzParseWait(f *testing.F) {
	for _, s := range []string{"", "wait=1", "wait=30", "wait=0", "wait=31", "wait=-5", "wait=+3", "wait=1&wait=1",
		"wait=%31", "wait=1e1", "x=1", "wait", "wait=00000000000000000000000000007", "wait=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		n, p := parseWait(q)
		switch {
		case p != nil:
			if n != 0 || len(p.Errors) != 1 || p.Errors[0].Field == "" || p.Status != 400 {
				t.Fatalf("%q: n=%d problem %+v", raw, n, p)
			}
		case n == 0:
			if len(q) != 0 {
				t.Fatalf("%q: no wait and no problem for a non-empty query", raw)
			}
		default:
			if n < 1 || n > maxWaitSeconds || len(q["wait"]) != 1 || strconv.Itoa(n) != q.Get("wait") && q.Get("wait")[0] != '0' && q.Get("wait")[0] != '+' {
				t.Fatalf("%q: wait %d", raw, n)
			}
		}
	})
}

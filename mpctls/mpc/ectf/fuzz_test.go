package ectf

import (
	"crypto/rand"
	"testing"
)

// FuzzMessages feeds arbitrary bytes to each step as the peer's message.
func FuzzMessages(f *testing.F) {
	fx := setup(f)
	dom := []byte("fuzz")
	p, flips, err := NewProver(rand.Reader, dom, fx.xp, fx.yp, fx.cots)
	if err != nil {
		f.Fatal(err)
	}
	n, err := NewNotary(dom, fx.xq, fx.yq, fx.delta, fx.q, fx.index)
	if err != nil {
		f.Fatal(err)
	}
	m1, _ := n.First(flips)
	w, _ := p.Second(m1)
	m2, _, _ := n.Second(w)
	f.Add(flips, m1, w, m2)
	f.Add([]byte{}, []byte{0}, make([]byte, 64), make([]byte, 7))
	f.Fuzz(func(t *testing.T, flips, m1, w, m2 []byte) {
		n, err := NewNotary(dom, fx.xq, fx.yq, fx.delta, fx.q, fx.index)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.First(flips); err == nil {
			n.Second(w)
		}
		p, _, err := NewProver(rand.Reader, dom, fx.xp, fx.yp, fx.cots)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Second(m1); err == nil {
			p.Finish(m2)
		}
	})
}

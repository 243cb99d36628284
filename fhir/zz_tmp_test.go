package fhir

import (
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

func BenchmarkZZWalks(b *testing.B) {
	data := bundle20KB()
	r, errs := (r4.Options{MaxBytes: DefaultMaxBytes}).Decode(data)
	if r == nil || len(errs) > 0 {
		b.Fatal(errs)
	}
	b.Run("walkids", func(b *testing.B) {
		for b.Loop() {
			r4.WalkIDs(r, func(*r4.Path, any, string) error { return nil })
		}
	})
	b.Run("specwalk", func(b *testing.B) {
		for b.Loop() {
			specWalk(r, nil, nil)
		}
	})
	b.Run("validate-noconstraints", func(b *testing.B) {
		checkConstraints = false
		defer func() { checkConstraints = true }()
		for b.Loop() {
			v := &validator{errorsOnly: true}
			v.validate(r)
		}
	})
	b.Run("validate", func(b *testing.B) {
		for b.Loop() {
			v := &validator{errorsOnly: true}
			v.validate(r)
		}
	})
}

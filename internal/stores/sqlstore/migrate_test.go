package sqlstore

import "testing"

// Both backends move through the same schema versions, so SchemaVersion
// means the same for either, and each file is a numbered step.
func TestMigrationsInStep(t *testing.T) {
	sq, err := migrations("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := migrations("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if len(sq) == 0 || len(sq) != len(pg) {
		t.Fatalf("sqlite has %d migrations, postgres %d", len(sq), len(pg))
	}
	for i := range sq {
		if sq[i].name != pg[i].name {
			t.Errorf("migration %d is %q for sqlite but %q for postgres", i+1, sq[i].name, pg[i].name)
		}
	}
	if SchemaVersion() != len(sq) {
		t.Fatalf("SchemaVersion() = %d, want %d", SchemaVersion(), len(sq))
	}
	if _, err := migrations("nosuch"); err == nil {
		t.Fatal("migrations of an unknown backend did not fail")
	}
}

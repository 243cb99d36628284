package notary_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds/mpctls/notary"
)

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notary.key")
	key, created, err := notary.LoadOrCreateKey(path)
	if err != nil || !created || len(key) == 0 {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	again, created, err := notary.LoadOrCreateKey(path)
	if err != nil || created || !again.Equal(key) {
		t.Fatalf("reload: created=%v err=%v same=%v", created, err, again.Equal(key))
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := notary.LoadOrCreateKey(path); err == nil {
		t.Fatal("a world-readable key file was accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := notary.LoadOrCreateKey(bad); err == nil {
		t.Fatal("garbage accepted as a key")
	}
	if b, _ := os.ReadFile(bad); string(b) != "not a key" {
		t.Fatal("an existing file was overwritten")
	}
}

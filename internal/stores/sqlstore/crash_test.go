package sqlstore_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store/storetest"
)

// crashChildEnv makes the test binary act as the process that is killed.
const crashChildEnv = "ACDS_STORE_CRASH_CHILD_DB"

// TestSQLiteSurvivesKill9 runs a writer in a child process, kills it with
// SIGKILL while 8 goroutines are writing, and checks that every request
// whose CreateRequest had returned nil (the child printed its id) is in the
// reopened database, and that the database is intact. (This proves that
// an acknowledged write is committed; that a commit survives power loss as
// well is what synchronous=FULL adds, which a test cannot cut power to show.)
func TestSQLiteSurvivesKill9(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "acds.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteSurvivesKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	acked := map[string]bool{}
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < 300 {
		var id string
		if _, err := fmt.Sscanf(sc.Text(), "acked %s", &id); err == nil {
			acked[id] = true
		}
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no deferred code, no Close
	// Ids printed between our last read and the kill were acknowledged too.
	for sc.Scan() {
		var id string
		if _, err := fmt.Sscanf(sc.Text(), "acked %s", &id); err == nil {
			acked[id] = true
		}
	}
	_ = cmd.Wait()
	require.GreaterOrEqual(t, len(acked), 300, "the child acknowledged too few writes")

	s, err := sqlstore.OpenSQLite(t.Context(), path)
	require.NoError(t, err)
	defer s.Close()
	for id := range acked {
		_, err := s.GetRequest(t.Context(), "anon-crash", id)
		require.NoError(t, err, "acknowledged request %s lost", id)
	}
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var check string
	require.NoError(t, db.QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&check))
	require.Equal(t, "ok", check)
}

// crashChild writes requests until it is killed, printing each id once its
// CreateRequest has returned nil.
func crashChild(path string) {
	ctx := context.Background()
	s, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Minute) // the parent kills us long before
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				r := storetest.NewRequest("anon-crash", time.Now())
				if err := s.CreateRequest(ctx, r); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(w, "acked %s\n", r.ID)
				_ = w.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}

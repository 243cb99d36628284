package sqlstore_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

// faultChildEnv makes the test binary the process whose store is
// damaged: "PATH PIN", PIN "1" to hold a reader on the database that
// keeps every commit in the write-ahead log (no checkpoint can pass it).
const faultChildEnv = "ACDS_STORE_FAULT_CHILD"

// A fault damages the files of a killed store.
type fault struct {
	name string
	do   func(t *testing.T, db string)
	// refuse: with every commit in the log (pinned), or checkpointed
	// into the file (not pinned), the fault loses acknowledged writes
	// for certain, so the store must refuse; otherwise it may also find
	// nothing lost, and must then hold every acknowledged write.
	refusePinned, refuseCheckpointed bool
	kinds                            []sqlstore.LossKind
}

func removeFiles(t *testing.T, paths ...string) {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

func truncateHalf(t *testing.T, path string) {
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, fi.Size()/2))
}

// The write-ahead log faults remove the -shm index too, as a reboot or
// a copy of the directory would: with the index of the killed process
// still there, SQLite trusts it rather than read the log again.
var faults = []fault{
	{name: "wal-deleted", refusePinned: true, kinds: []sqlstore.LossKind{sqlstore.LossBehind},
		do: func(t *testing.T, db string) { removeFiles(t, db+"-wal", db+"-shm") }},
	{name: "wal-first-frame-corrupt", refusePinned: true, kinds: []sqlstore.LossKind{sqlstore.LossBehind},
		do: func(t *testing.T, db string) {
			f, err := os.OpenFile(db+"-wal", os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			if fi, _ := f.Stat(); fi.Size() > 32+24+200 {
				_, err = f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, 32+24+100) // inside frame 1's page
				require.NoError(t, err)
			}
			removeFiles(t, db+"-shm")
		}},
	{name: "wal-truncated", refusePinned: true, kinds: []sqlstore.LossKind{sqlstore.LossBehind},
		do: func(t *testing.T, db string) {
			truncateHalf(t, db+"-wal")
			removeFiles(t, db+"-shm")
		}},
	{name: "db-emptied", refusePinned: true, refuseCheckpointed: true, kinds: []sqlstore.LossKind{sqlstore.LossNewDatabase},
		do: func(t *testing.T, db string) {
			require.NoError(t, os.Truncate(db, 0))
			removeFiles(t, db+"-wal", db+"-shm")
		}},
	{name: "db-emptied-wal-kept", refuseCheckpointed: true, kinds: []sqlstore.LossKind{sqlstore.LossNewDatabase, sqlstore.LossDamaged, sqlstore.LossBehind, sqlstore.LossOtherDatabase},
		do: func(t *testing.T, db string) {
			require.NoError(t, os.Truncate(db, 0))
			removeFiles(t, db+"-shm")
		}},
	{name: "db-deleted", refusePinned: true, refuseCheckpointed: true, kinds: []sqlstore.LossKind{sqlstore.LossNewDatabase},
		do: func(t *testing.T, db string) { removeFiles(t, db, db+"-wal", db+"-shm") }},
	{name: "db-and-mark-deleted", refusePinned: true, refuseCheckpointed: true, kinds: []sqlstore.LossKind{sqlstore.LossNewDatabase},
		do: func(t *testing.T, db string) { removeFiles(t, db, db+"-wal", db+"-shm", db+"-mark") }},
	{name: "db-truncated", refuseCheckpointed: true, kinds: []sqlstore.LossKind{sqlstore.LossDamaged},
		do: func(t *testing.T, db string) { truncateHalf(t, db) }},
	{name: "mark-deleted", refusePinned: true, refuseCheckpointed: true, kinds: []sqlstore.LossKind{sqlstore.LossMarkMissing},
		do: func(t *testing.T, db string) { removeFiles(t, db+"-mark") }},
}

// TestSQLiteFaultsAfterKill9 acknowledges writes in a child process,
// kills it with SIGKILL, damages the database's files as each fault says
// and reopens the store as an installation that holds state would
// (MarkOptions.Installed): it must either hold every session and request
// it acknowledged, or refuse with a DataLossError naming the loss. Each
// fault runs twice: with every commit still in the write-ahead log (a
// reader held in the child keeps checkpoints from passing it), and with
// every commit checkpointed into the database file and the log
// truncated. A refused store then opens with AcceptDataLoss, which
// records the acceptance, and opens again without it.
func TestSQLiteFaultsAfterKill9(t *testing.T) {
	if arg := os.Getenv(faultChildEnv); arg != "" {
		path, pin, _ := strings.Cut(arg, " ")
		faultChild(path, pin == "1")
		return
	}
	if testing.Short() {
		t.Skip("runs a child process per fault")
	}
	t.Parallel()
	for _, f := range faults {
		for _, pinned := range []bool{true, false} {
			name := f.name + map[bool]string{true: "/in-log", false: "/checkpointed"}[pinned]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				db := filepath.Join(t.TempDir(), "acds.db")
				acked := runFaultChild(t, db, pinned)
				f.do(t, db)
				s, err := sqlstore.OpenSQLiteWith(t.Context(), db, sqlstore.MarkOptions{Installed: true})
				mustRefuse := pinned && f.refusePinned || !pinned && f.refuseCheckpointed
				if err == nil {
					defer s.Close()
					require.False(t, mustRefuse, "the store opened although the fault lost acknowledged writes")
					checkAcked(t, s, acked)
					t.Logf("opened with all %d acknowledged writes", acked.len())
					return
				}
				var loss *sqlstore.DataLossError
				require.ErrorAs(t, err, &loss)
				require.ErrorIs(t, err, store.ErrDataLoss)
				require.Contains(t, f.kinds, loss.Kind, "%v", err)
				t.Logf("refused: %v", err)
				if !loss.Acceptable() {
					_, err := sqlstore.OpenSQLiteWith(t.Context(), db, sqlstore.MarkOptions{Installed: true, AcceptDataLoss: true})
					require.ErrorIs(t, err, store.ErrDataLoss, "a damaged database opened")
					return
				}
				s, err = sqlstore.OpenSQLiteWith(t.Context(), db, sqlstore.MarkOptions{Installed: true, AcceptDataLoss: true})
				require.NoError(t, err)
				require.NotNil(t, s.AcceptedLoss())
				require.Equal(t, loss.Kind, s.AcceptedLoss().Kind)
				require.NoError(t, s.CreateRequest(t.Context(), storetest.NewRequest("anon-after", time.Now())))
				require.NoError(t, s.Close())
				s, err = sqlstore.OpenSQLiteWith(t.Context(), db, sqlstore.MarkOptions{Installed: true})
				require.NoError(t, err, "the accepted loss was not moved into the mark")
				require.Nil(t, s.AcceptedLoss())
				require.NoError(t, s.Close())
				rdb, err := sql.Open("sqlite", db)
				require.NoError(t, err)
				defer rdb.Close()
				var kind string
				require.NoError(t, rdb.QueryRowContext(t.Context(), "SELECT kind FROM data_loss_accepted").Scan(&kind))
				require.Equal(t, loss.Kind.String(), kind)
			})
		}
	}
}

// acked is what the child acknowledged: its session's token hash and
// the ids of its requests.
type acked struct {
	session  []byte
	requests []string
}

func (a acked) len() int { return len(a.requests) + 1 }

// runFaultChild runs the child on db until it has acknowledged its
// writes (and, unless pinned, checkpointed them and truncated the log),
// kills it with SIGKILL and returns what it acknowledged.
func runFaultChild(t *testing.T, db string, pinned bool) acked {
	t.Helper()
	pin := map[bool]string{true: "1", false: "0"}[pinned]
	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteFaultsAfterKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), faultChildEnv+"="+db+" "+pin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var a acked
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "acked "); ok {
			a.requests = append(a.requests, id)
		} else if tok, ok := strings.CutPrefix(line, "session "); ok {
			h := sha256.Sum256([]byte(tok))
			a.session = h[:]
		} else if line == "ready" {
			ready = true
			break
		}
	}
	require.True(t, ready, "the child stopped before it was ready")
	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no Close, no checkpoint
	_ = cmd.Wait()
	require.NotNil(t, a.session)
	require.Len(t, a.requests, faultRequests)
	if fi, err := os.Stat(db + "-wal"); pinned {
		require.NoError(t, err)
		require.Greater(t, fi.Size(), int64(faultRequests*1000), "the log does not hold the commits")
	}
	return a
}

const faultRequests = 30

// faultChild acknowledges a session and faultRequests requests, then
// says "ready" once they are where the parent wants them: in the log
// (pin) or checkpointed with the log truncated; and waits to be killed.
func faultChild(path string, pin bool) {
	ctx := context.Background()
	die := func(err error) {
		fmt.Fprintln(os.Stderr, "fault child:", err)
		os.Exit(2)
	}
	s, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		die(err)
	}
	if pin {
		rdb, err := sql.Open("sqlite", path+"?mode=ro")
		if err != nil {
			die(err)
		}
		tx, err := rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			die(err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM requests").Scan(&n); err != nil {
			die(err)
		}
	}
	w := bufio.NewWriter(os.Stdout)
	token := "fault-child-token"
	h := sha256.Sum256([]byte(token))
	now := time.Now()
	if err := s.CreateSession(ctx, store.Session{Pseudonym: "anon-fault", TokenHash: h[:], CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		die(err)
	}
	fmt.Fprintf(w, "session %s\n", token)
	input := storetest.Bundle(2 << 10)
	for i := range faultRequests {
		r := storetest.NewRequest("anon-fault", now.Add(time.Duration(i)))
		r.Input = input
		if err := s.CreateRequest(ctx, r); err != nil {
			die(err)
		}
		fmt.Fprintf(w, "acked %s\n", r.ID)
	}
	if !pin {
		// The checkpointer truncates the log once writes pause.
		deadline := time.Now().Add(30 * time.Second)
		for {
			fi, err := os.Stat(path + "-wal")
			if err == nil && fi.Size() == 0 {
				break
			}
			if time.Now().After(deadline) {
				die(errors.New("the log was not truncated"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	fmt.Fprintln(w, "ready")
	_ = w.Flush()
	time.Sleep(time.Hour) // until killed
}

// checkAcked checks that s holds everything the child acknowledged.
func checkAcked(t *testing.T, s store.Store, a acked) {
	t.Helper()
	_, err := s.SessionByTokenHash(t.Context(), a.session)
	require.NoError(t, err, "the acknowledged session is lost")
	for _, id := range a.requests {
		_, err := s.GetRequest(t.Context(), "anon-fault", id)
		require.NoError(t, err, "acknowledged request %s lost", id)
	}
}

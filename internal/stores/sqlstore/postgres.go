package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acds-project/acds"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acds-project/acds/store"
)

// Postgres is the scale-out store: several `acds serve` replicas share one
// PostgreSQL database, and each accepted request is leased to one worker
// of one replica at a time.
//
// Claim selects the oldest claimable request with SELECT … FOR UPDATE SKIP
// LOCKED: a row another replica is claiming is skipped rather than waited
// for, and the lease is written in the same transaction, so two workers
// never hold the same request. Complete, Fail and Heartbeat are single
// UPDATEs conditioned on the lease owner, which the row lock orders after
// any concurrent re-claim.
//
// Durability is PostgreSQL's: a method returns after COMMIT, which with the
// default synchronous_commit=on means the WAL record is flushed (and, with
// synchronous replication configured, replicated).
//
// # High-water mark
//
// Opened with MarkOptions.Path (OpenPostgresWith), a replica keeps a mark
// of its own (mark.go): its row in replica_marks, whose seq it advances
// with one UPDATE per round of the marker after its writes have
// committed, copied into its mark file once that UPDATE has committed. A
// write a client is told about (a session, a passphrase, a request, a
// completion or failure, a deletion) returns only after a round that
// began once it had committed; claims, heartbeats, erasures and webhook
// bookkeeping do not wait (losing them loses no answer). Because a
// snapshot or a point-in-time recovery that holds a round's UPDATE holds
// every transaction committed before it, a database restored from before
// one of those writes has the row behind the mark, and the replica
// refuses it, as it refuses a database of another identity (a new one, a
// reset) or one without its row. Each replica compares only its own row,
// so replicas sharing a database never make each other refuse: a
// healthy database is never behind any of them.
//
// The tables live in the first schema of the connection's search_path; put
// search_path in the connection string to keep several deployments (or
// test runs) apart in one database. Erased data is removed from the
// tables at once and from disk by PostgreSQL's (auto)vacuum.
type Postgres struct {
	pool   *pgxpool.Pool
	closed atomic.Bool
	once   sync.Once

	// The high-water mark, when MarkOptions.Path is set: this replica,
	// the database's identity, the mark file and its marker, and the
	// loss accepted at open.
	replica  string
	identity []byte
	mfile    *markFile
	mark     *marker
	accepted *DataLossError
}

var _ store.Store = (*Postgres)(nil)

// defaultPgMaxConns is the pool size when the DSN does not set one.
const defaultPgMaxConns = 16

// OpenPostgres connects to the PostgreSQL database named by dsn (a
// postgres:// URL or a key=value connection string, as accepted by pgx)
// and applies the embedded schema migrations. Several processes may open
// the same database at once: migrations run under an advisory lock.
//
// The pool holds at most 16 connections unless the connection string sets
// pool_max_conns (see pgxpool.ParseConfig for the other pool_ settings).
// Errors never contain the connection string or its password.
//
// It keeps no high-water mark (see OpenPostgresWith).
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	return OpenPostgresWith(ctx, dsn, MarkOptions{})
}

// pgMarkTimeout bounds one round of the marker's UPDATE.
const pgMarkTimeout = 10 * time.Second

// OpenPostgresWith is OpenPostgres keeping the replica's high-water mark
// in o.Path (see the type's High-water mark section), named o.Replica in
// the database. A database behind the mark, of another identity, without
// this replica's row although the mark has one, or new while o.Installed,
// is refused with a *DataLossError (errors.Is store.ErrDataLoss) unless
// o.AcceptDataLoss. With o.Path empty it keeps no mark.
func OpenPostgresWith(ctx context.Context, dsn string, o MarkOptions) (*Postgres, error) {
	if o.Path != "" && (o.Replica == "" || len(o.Replica) > store.MaxIDLen) {
		return nil, fmt.Errorf("%w: a postgres high-water mark needs a replica name of 1..%d bytes", store.ErrInvalid, store.MaxIDLen)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the connection string, and their
		// password redaction is best effort: say nothing about it.
		return nil, fmt.Errorf("%w: cannot parse the postgres connection string", store.ErrInvalid)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "acds" // names our sessions in pg_stat_activity
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// pgxpool's default (4, or the CPU count) queues a busy server's
		// accepts behind its workers; PostgreSQL commits concurrent
		// transactions with shared WAL flushes, so more connections
		// mean more requests per fsync.
		cfg.MaxConns = defaultPgMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	p := &Postgres{pool: pool}
	if err := p.open(ctx, o); err != nil {
		pool.Close()
		_ = p.mfile.close()
		return nil, err
	}
	return p, nil
}

// open migrates the database between the two halves of the check of the
// high-water mark, as SQLite's openMark does, then registers this
// replica's row and brings the mark file up to it.
func (p *Postgres) open(ctx context.Context, mo MarkOptions) error {
	if mo.Path == "" {
		return migratePostgres(ctx, p.pool)
	}
	version, err := pgSchemaVersion(ctx, p.pool)
	if err != nil {
		return err
	}
	o := opened{database: "postgres", mark: mo.Path, installed: mo.Installed, dbNew: version == 0}
	var gen uint64
	o.file, gen, o.fileExists, o.fileErr = readMark(mo.Path)
	if o.dbNew {
		if loss := o.verdict(); loss != nil && !mo.AcceptDataLoss {
			return loss
		}
	}
	if err := migratePostgres(ctx, p.pool); err != nil {
		return err
	}
	if err := p.pool.QueryRow(ctx, "SELECT identity FROM store_mark WHERE id = 1").Scan(&o.db.identity); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return &DataLossError{Kind: LossDamaged, Database: "postgres", Err: errors.New("its store_mark row is missing")}
		}
		return p.err("read the high-water mark", err)
	}
	var seq int64
	var at time.Time
	switch err := p.pool.QueryRow(ctx, "SELECT seq, at FROM replica_marks WHERE replica = $1", mo.Replica).Scan(&seq, &at); {
	case err == nil:
		o.db.seq, o.db.at, o.dbMarked = uint64(seq), at.UTC(), true
	case !errors.Is(err, pgx.ErrNoRows):
		return p.err("read the high-water mark", err)
	}
	loss := o.verdict()
	if loss != nil && !mo.AcceptDataLoss {
		return loss
	}
	if loss != nil {
		if _, err := p.pool.Exec(ctx, "INSERT INTO data_loss_accepted (at, replica, kind, detail) VALUES (now(), $1, $2, $3)",
			mo.Replica, loss.Kind.String(), loss.Error()); err != nil {
			return p.err("record the accepted loss", err)
		}
		p.accepted = loss
	}
	err = p.pool.QueryRow(ctx, `INSERT INTO replica_marks (replica, seq, at) VALUES ($1, 1, now())
		ON CONFLICT (replica) DO UPDATE SET seq = replica_marks.seq + 1, at = now() RETURNING seq, at`, mo.Replica).Scan(&seq, &at)
	if err != nil {
		return p.err("register the high-water mark", err)
	}
	p.replica, p.identity = mo.Replica, o.db.identity
	pos := markState{identity: p.identity, seq: uint64(seq), at: at.UTC()}
	if p.mfile, err = openMarkFile(mo.Path, pos, gen, o.fileExists, o.fileErr != nil); err != nil {
		return err
	}
	p.mark = newMarker(p.syncMark)
	return nil
}

// pgSchemaVersion is the highest migration the database records, 0 for
// one without our schema.
func pgSchemaVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return 0, fmt.Errorf("store: read the schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("store: read the schema version: %w", err)
	}
	return v, nil
}

// syncMark is the marker's round: it advances this replica's row, then
// copies it into the mark file.
func (p *Postgres) syncMark(markState) error {
	ctx, cancel := context.WithTimeout(context.Background(), pgMarkTimeout)
	defer cancel()
	var seq int64
	var at time.Time
	err := p.pool.QueryRow(ctx, "UPDATE replica_marks SET seq = seq + 1, at = now() WHERE replica = $1 RETURNING seq, at", p.replica).Scan(&seq, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return errors.New("this replica's row of replica_marks is gone: the database was reset or replaced while it ran")
	}
	if err != nil {
		return err
	}
	return p.mfile.write(markState{identity: p.identity, seq: uint64(seq), at: at.UTC()})
}

// marked returns once the high-water mark covers the writes this
// goroutine committed (at once without a mark).
func (p *Postgres) marked(ctx context.Context) error {
	if p.mark == nil {
		return nil
	}
	return p.mark.wait(ctx)
}

// AcceptedLoss is the loss this store accepted when it opened
// (MarkOptions.AcceptDataLoss), or nil.
func (p *Postgres) AcceptedLoss() *DataLossError { return p.accepted }

func migratePostgres(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations("postgres")
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// The lock is per schema and released with the transaction: two
		// replicas starting at once take turns, and the second finds
		// the migrations recorded.
		var schema *string
		if err := tx.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return fmt.Errorf("store: migrate: %w", err)
		}
		if schema == nil {
			return errors.New("store: migrate: no schema of the search_path exists")
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('acds/store/migrate/' || $1::text))", *schema); err != nil {
			return fmt.Errorf("store: migrate: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer     NOT NULL PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("store: migrate: %w", err)
		}
		var have int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err != nil {
			return fmt.Errorf("store: migrate: %w", err)
		}
		if have > len(ms) {
			return errNewerSchema(have, len(ms))
		}
		applied := map[int]string{}
		rows, err := tx.Query(ctx, "SELECT version, name FROM schema_migrations")
		if err != nil {
			return fmt.Errorf("store: migrate: %w", err)
		}
		for rows.Next() {
			var v int
			var name string
			if err := rows.Scan(&v, &name); err != nil {
				rows.Close()
				return fmt.Errorf("store: migrate: %w", err)
			}
			applied[v] = name
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store: migrate: %w", err)
		}
		if err := checkApplied(applied, ms); err != nil {
			return err
		}
		for _, m := range ms[have:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("store: migration %d (%s): %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return fmt.Errorf("store: migration %d: %w", m.version, err)
			}
		}
		return nil
	})
}

// err maps a pgx error.
func (p *Postgres) err(what string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		return store.ErrConflict
	}
	if p.closed.Load() {
		return store.ErrClosed
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

func pgTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	d := store.StoredTime(t)
	return &d
}

func fromPg(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// CreateSession implements [Store].
func (p *Postgres) CreateSession(ctx context.Context, s store.Session) error {
	if err := store.CheckSession(s); err != nil {
		return err
	}
	_, err := p.pool.Exec(ctx, "INSERT INTO sessions (pseudonym, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4)",
		s.Pseudonym, s.TokenHash, store.StoredTime(s.CreatedAt), store.StoredTime(s.ExpiresAt))
	if err != nil {
		return p.err("create session", err)
	}
	return p.marked(ctx)
}

// SessionByTokenHash implements [Store].
func (p *Postgres) SessionByTokenHash(ctx context.Context, tokenHash []byte) (store.Session, error) {
	if err := store.CheckTokenHash(tokenHash); err != nil {
		return store.Session{}, err
	}
	var s store.Session
	err := p.pool.QueryRow(ctx, "SELECT pseudonym, token_hash, created_at, expires_at FROM sessions WHERE token_hash = $1", tokenHash).
		Scan(&s.Pseudonym, &s.TokenHash, &s.CreatedAt, &s.ExpiresAt)
	if err != nil {
		return store.Session{}, p.err("session", err)
	}
	s.CreatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC()
	return s, nil
}

// SetPassphrase implements [Store]. It replaces an existing passphrase.
func (p *Postgres) SetPassphrase(ctx context.Context, pseudonym, encodedHash string) error {
	if err := checkPassphrase(pseudonym, encodedHash); err != nil {
		return err
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO passphrases (pseudonym, encoded_hash, updated_at) VALUES ($1, $2, now())
		ON CONFLICT (pseudonym) DO UPDATE SET encoded_hash = excluded.encoded_hash, updated_at = excluded.updated_at`,
		pseudonym, encodedHash)
	if err != nil {
		return p.err("set passphrase", err)
	}
	return p.marked(ctx)
}

// Passphrase implements [Store].
func (p *Postgres) Passphrase(ctx context.Context, pseudonym string) (string, error) {
	if err := store.CheckName("pseudonym", pseudonym); err != nil {
		return "", err
	}
	var h string
	if err := p.pool.QueryRow(ctx, "SELECT encoded_hash FROM passphrases WHERE pseudonym = $1", pseudonym).Scan(&h); err != nil {
		return "", p.err("passphrase", err)
	}
	return h, nil
}

// DeleteExpiredSessions implements [Store].
func (p *Postgres) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	tag, err := p.pool.Exec(ctx, "DELETE FROM sessions WHERE expires_at < $1", store.StoredTime(now))
	if err != nil {
		return 0, p.err("delete expired sessions", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteSession implements [Store].
func (p *Postgres) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if err := store.CheckTokenHash(tokenHash); err != nil {
		return err
	}
	tag, err := p.pool.Exec(ctx, "DELETE FROM sessions WHERE token_hash = $1", tokenHash)
	if err != nil {
		return p.err("delete session", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return p.marked(ctx)
}

// DeleteSessionsOf implements [Store].
func (p *Postgres) DeleteSessionsOf(ctx context.Context, pseudonym string, keep []byte) (int, error) {
	if err := store.CheckName("pseudonym", pseudonym); err != nil {
		return 0, err
	}
	lo, hi := store.SessionKeyRange(pseudonym)
	tag, err := p.pool.Exec(ctx, `DELETE FROM sessions WHERE (pseudonym = $1 OR (pseudonym >= $2 AND pseudonym < $3))
		AND token_hash IS DISTINCT FROM $4`, pseudonym, lo, hi, keep)
	if err != nil {
		return 0, p.err("delete sessions", err)
	}
	return int(tag.RowsAffected()), p.marked(ctx)
}

// CreateRequest implements [Store]. The request is stored as
// acds.StatusProcessing with no attempts and no lease, whatever r says about
// those; UpdatedAt is set to CreatedAt.
func (p *Postgres) CreateRequest(ctx context.Context, r store.Request) error {
	if err := store.CheckNewRequest(r); err != nil {
		return err
	}
	created := store.StoredTime(r.CreatedAt)
	const insert = `INSERT INTO requests (id, owner, kind, status, input, sealed, affinity, created_at, updated_at)
		VALUES ($1, $2, $3, 'processing', $4, $5, $6, $7, $7)`
	if r.Callback == "" {
		if _, err := p.pool.Exec(ctx, insert, r.ID, r.Owner, r.Kind, r.Input, r.Sealed, r.Affinity, created); err != nil {
			return p.err("create request", err)
		}
		return p.marked(ctx)
	}
	// The delivery exists as soon as the request does: one transaction.
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insert, r.ID, r.Owner, r.Kind, r.Input, r.Sealed, r.Affinity, created); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO webhooks (request_id, url, next_at, created_at) VALUES ($1, $2, $3, $3)`,
			r.ID, r.Callback, created)
		return err
	})
	if err != nil {
		return p.err("create request", err)
	}
	return p.marked(ctx)
}

const pgRequestCols = `id, owner, kind, status, input, sealed, result, error, attempts,
	lease_owner, lease_until, created_at, updated_at, completed_at, erased_at, affinity, isolation`

func scanPgRequest(row pgx.Row) (store.Request, error) {
	var r store.Request
	var leaseUntil, completedAt, erasedAt *time.Time
	err := row.Scan(&r.ID, &r.Owner, &r.Kind, &r.Status, &r.Input, &r.Sealed, &r.Result, &r.Error, &r.Attempts,
		&r.LeaseOwner, &leaseUntil, &r.CreatedAt, &r.UpdatedAt, &completedAt, &erasedAt, &r.Affinity, &r.Isolation)
	if err != nil {
		return store.Request{}, err
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	r.LeaseUntil, r.CompletedAt, r.ErasedAt = fromPg(leaseUntil), fromPg(completedAt), fromPg(erasedAt)
	return r, nil
}

// GetRequest implements [Store].
func (p *Postgres) GetRequest(ctx context.Context, owner, id string) (store.Request, error) {
	if owner == "" || id == "" || len(owner) > store.MaxIDLen || len(id) > store.MaxIDLen {
		return store.Request{}, store.ErrNotFound
	}
	r, err := scanPgRequest(p.pool.QueryRow(ctx, "SELECT "+pgRequestCols+" FROM requests WHERE id = $1 AND owner = $2", id, owner))
	if err != nil {
		return store.Request{}, p.err("get request", err)
	}
	return r, nil
}

// QueueStats implements [store.QueueStatter].
func (p *Postgres) QueueStats(ctx context.Context) (store.QueueStats, error) {
	var n int
	var oldest *time.Time
	err := p.pool.QueryRow(ctx, "SELECT COUNT(*), MIN(created_at) FROM requests WHERE status = 'processing'").Scan(&n, &oldest)
	if err != nil {
		return store.QueueStats{}, p.err("queue stats", err)
	}
	st := store.QueueStats{Processing: n}
	if oldest != nil {
		st.Oldest = oldest.UTC()
	}
	return st, nil
}

// ListRequests implements [Store]. A cursor it did not issue is ErrInvalid.
func (p *Postgres) ListRequests(ctx context.Context, owner string, pg store.Page) ([]store.Request, string, error) {
	if err := store.CheckName("owner", owner); err != nil {
		return nil, "", err
	}
	g := store.NewPager(pg)
	// A page that ends short of the limit (Page.MaxBytes) stops the query:
	// closing the rows would otherwise read every row still coming, blobs
	// and all. (A full page has read all but the one extra row.)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var rows pgx.Rows
	var err error
	if pg.Cursor == "" {
		rows, err = p.pool.Query(ctx, "SELECT "+pgRequestCols+
			" FROM requests WHERE owner = $1 ORDER BY created_at DESC, id DESC LIMIT $2", owner, g.Query())
	} else {
		curAt, curID, cerr := store.DecodeCursor(pg.Cursor)
		if cerr != nil {
			return nil, "", cerr
		}
		rows, err = p.pool.Query(ctx, "SELECT "+pgRequestCols+
			` FROM requests WHERE owner = $1 AND (created_at, id) < ($2, $3)
			ORDER BY created_at DESC, id DESC LIMIT $4`, owner, curAt, curID, g.Query())
	}
	if err != nil {
		return nil, "", p.err("list requests", err)
	}
	defer rows.Close()
	for rows.Next() {
		if !g.Room() {
			if g.Short() {
				stop() // pgx closes this connection; the pool opens another
			}
			items, next := g.Page()
			return items, next, nil
		}
		r, err := scanPgRequest(rows)
		if err != nil {
			return nil, "", p.err("list requests", err)
		}
		g.Add(r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", p.err("list requests", err)
	}
	items, next := g.Page()
	return items, next, nil
}

// DeleteRequest implements [Store].
func (p *Postgres) DeleteRequest(ctx context.Context, owner, id string) error {
	if owner == "" || id == "" || len(owner) > store.MaxIDLen || len(id) > store.MaxIDLen {
		return store.ErrNotFound
	}
	tag, err := p.pool.Exec(ctx, "DELETE FROM requests WHERE id = $1 AND owner = $2", id, owner)
	if err != nil {
		return p.err("delete request", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return p.marked(ctx)
}

// Claim implements [Store] with SELECT … FOR UPDATE SKIP LOCKED, so that
// workers of every replica sharing the database each get a different
// request and never wait on one another.
func (p *Postgres) Claim(ctx context.Context, o store.ClaimOptions) (*store.Request, error) {
	o, err := store.NormalizeClaim(o)
	if err != nil {
		return nil, err
	}
	var claimed *store.Request
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		claimed = nil
		for {
			var id, leaseOwner string
			var attempts int
			var isolation store.Isolation
			err := tx.QueryRow(ctx, `SELECT id, attempts, lease_owner, isolation FROM requests
				WHERE status = 'processing' AND (lease_until IS NULL OR lease_until <= $1)
				AND ($2 = '' OR affinity = '' OR affinity = $2)`+isolationFilter(o)+`
				ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`, o.Now, o.Affinity).Scan(&id, &attempts, &leaseOwner, &isolation)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			if o.Isolate && leaseOwner != "" { // a lease that ran out
				if isolation == store.Solo {
					if err := pgFailClaimable(ctx, tx, id, o.Crashed, o.Now); err != nil {
						return err
					}
					continue
				}
				attempts = max(attempts-1, 0)
				if _, err := tx.Exec(ctx, `UPDATE requests SET isolation = 1, attempts = $1, lease_owner = '', lease_until = NULL
					WHERE id = $2`, attempts, id); err != nil {
					return err
				}
				if !o.Solo {
					continue
				}
			}
			if o.MaxAttempts > 0 && attempts >= o.MaxAttempts {
				if err := pgFailClaimable(ctx, tx, id, o.Exhausted, o.Now); err != nil {
					return err
				}
				continue
			}
			if o.Solo {
				isolation = store.Solo
			}
			r, err := scanPgRequest(tx.QueryRow(ctx, `UPDATE requests SET attempts = attempts + 1, lease_owner = $1,
				lease_until = $2, updated_at = $3, isolation = $4 WHERE id = $5 RETURNING `+pgRequestCols,
				o.Worker, store.StoredTime(o.Now.Add(o.Lease)), o.Now, isolation, id))
			if err != nil {
				return err
			}
			claimed = &r
			return nil
		}
	})
	if err != nil {
		return nil, p.err("claim", err)
	}
	return claimed, nil
}

// pgFailClaimable ends request id, found by a claim, as failed with problem.
func pgFailClaimable(ctx context.Context, tx pgx.Tx, id string, problem []byte, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE requests SET status = 'failed', error = $1, sealed = NULL, affinity = '',
		lease_owner = '', lease_until = NULL, updated_at = $2, completed_at = $2 WHERE id = $3`, problem, now, id)
	return err
}

// Release implements [Store].
func (p *Postgres) Release(ctx context.Context, id, worker string) error {
	if id == "" || worker == "" {
		return store.ErrLeaseLost
	}
	tag, err := p.pool.Exec(ctx, `UPDATE requests SET lease_owner = '', lease_until = NULL,
		isolation = CASE WHEN isolation = 2 THEN 1 ELSE isolation END
		WHERE id = $1 AND lease_owner = $2 AND status = 'processing'`, id, worker)
	if err != nil {
		return p.err("release", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrLeaseLost
	}
	return nil
}

// Suspects implements [Store].
func (p *Postgres) Suspects(ctx context.Context, now time.Time, affinity string) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM requests
		WHERE status = 'processing' AND ($1 = '' OR affinity = '' OR affinity = $1)
		AND ((isolation = 1 AND lease_owner = '') OR (isolation = 0 AND lease_owner <> '' AND lease_until <= $2))`,
		affinity, store.StoredTime(now)).Scan(&n)
	if err != nil {
		return 0, p.err("suspects", err)
	}
	return n, nil
}

// Heartbeat implements [Store].
func (p *Postgres) Heartbeat(ctx context.Context, id, worker string, until time.Time) error {
	if id == "" || worker == "" {
		return store.ErrLeaseLost
	}
	tag, err := p.pool.Exec(ctx, `UPDATE requests SET lease_until = $1
		WHERE id = $2 AND lease_owner = $3 AND status = 'processing'`, store.StoredTime(until), id, worker)
	if err != nil {
		return p.err("heartbeat", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrLeaseLost
	}
	return nil
}

// Complete implements [Store].
func (p *Postgres) Complete(ctx context.Context, id, worker string, result []byte, now time.Time) error {
	return p.finish(ctx, id, worker, acds.StatusCompleted, "result", result, now)
}

// Fail implements [Store].
func (p *Postgres) Fail(ctx context.Context, id, worker string, problem []byte, now time.Time) error {
	return p.finish(ctx, id, worker, acds.StatusFailed, "error", problem, now)
}

func (p *Postgres) finish(ctx context.Context, id, worker, status, col string, val []byte, now time.Time) error {
	if id == "" || worker == "" {
		return store.ErrLeaseLost
	}
	tag, err := p.pool.Exec(ctx, `UPDATE requests SET status = $1, `+col+` = $2, sealed = NULL, affinity = '',
		lease_owner = '', lease_until = NULL, updated_at = $3, completed_at = $3
		WHERE id = $4 AND lease_owner = $5 AND status = 'processing'`, status, val, store.StoredTime(now), id, worker)
	if err != nil {
		return p.err(status, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrLeaseLost
	}
	return p.marked(ctx)
}

// EraseSealedBefore implements [Store].
func (p *Postgres) EraseSealedBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := p.pool.Exec(ctx, "UPDATE requests SET sealed = NULL, affinity = '' WHERE sealed IS NOT NULL AND created_at < $1", store.StoredTime(t))
	if err != nil {
		return 0, p.err("erase sealed", err)
	}
	return int(tag.RowsAffected()), nil
}

// EraseEndedBefore implements [Store].
func (p *Postgres) EraseEndedBefore(ctx context.Context, t, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	at := store.StoredTime(now)
	tag, err := p.pool.Exec(ctx, `UPDATE requests SET input = NULL, result = NULL, sealed = NULL, erased_at = $1, updated_at = $1
		WHERE id IN (SELECT id FROM requests WHERE erased_at IS NULL AND completed_at IS NOT NULL
			AND completed_at < $2 ORDER BY completed_at LIMIT $3 FOR UPDATE SKIP LOCKED)`, at, store.StoredTime(t), limit)
	if err != nil {
		return 0, p.err("erase ended", err)
	}
	return int(tag.RowsAffected()), nil
}

// Close waits for the connections in use to be released and closes them.
// Methods called after Close return ErrClosed.
func (p *Postgres) Close() error {
	var err error
	p.once.Do(func() {
		p.closed.Store(true)
		if p.mark != nil {
			p.mark.close() // a last round, before the pool goes
		}
		p.pool.Close()
		err = p.mfile.close()
	})
	return err
}

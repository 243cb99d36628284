# shellcheck shell=bash
# Sourced (not executed) by .ci/run before `go test ./...`: makes sure a
# PostgreSQL server listens on 127.0.0.1:5432 with a database `test`, and
# exports ACDS_TEST_POSTGRES so the store and server tests use it.
#
# Idempotent; never calls `exit` (it runs inside .ci/run's shell) and works
# under `set -euo pipefail`. Order of preference:
#   1. ACDS_TEST_POSTGRES already set and reachable: keep it.
#   2. postgres@127.0.0.1:5432/test reachable without a password (trust auth,
#      as on the development machine): use it.
#   3. Otherwise install PostgreSQL if missing (apt-get), create and start the
#      cluster if needed, and create a login role `acds_ci` with a fresh
#      random password owning the database `test` (so it can create the
#      per-test schemas), via the local socket as the postgres OS user.
# If none of that works it returns 1, which stops CI: the PostgreSQL tests
# must not be skipped silently there.

acds_ci_postgres() {
  local host=127.0.0.1 port=5432 db=test
  local trust_dsn="postgres://postgres@${host}:${port}/${db}?sslmode=disable"

  acds_pg_ok() { # DSN -> 0 when `SELECT 1` works on it
    command -v psql >/dev/null 2>&1 || return 1
    PGCONNECT_TIMEOUT=5 psql "$1" -XAtqc 'SELECT 1' >/dev/null 2>&1
  }
  acds_as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
  }
  acds_as_postgres() { # run psql as the postgres OS user over the socket
    (cd / && acds_as_root runuser -u postgres -- "$@")
  }

  if [ -n "${ACDS_TEST_POSTGRES:-}" ] && acds_pg_ok "$ACDS_TEST_POSTGRES"; then
    echo "postgres: using ACDS_TEST_POSTGRES from the environment"
    return 0
  fi
  if acds_pg_ok "$trust_dsn"; then
    export ACDS_TEST_POSTGRES="$trust_dsn"
    echo "postgres: using $trust_dsn"
    return 0
  fi

  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "postgres: installing PostgreSQL"
    acds_as_root apt-get update -qq &&
      acds_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null ||
      { echo "postgres: cannot install PostgreSQL (needs root or passwordless sudo, and apt)" >&2; return 1; }
  fi
  local ver
  ver="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -z "$ver" ]; then
    ver="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
    acds_as_root pg_createcluster "$ver" main >/dev/null || { echo "postgres: cannot create a cluster" >&2; return 1; }
  elif [ ! -d "/etc/postgresql/$ver/main" ]; then
    acds_as_root pg_createcluster "$ver" main >/dev/null || { echo "postgres: cannot create a cluster" >&2; return 1; }
  fi
  if ! pg_isready -q -h "$host" -p "$port"; then
    echo "postgres: starting cluster $ver/main"
    acds_as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start ||
      { echo "postgres: cannot start cluster $ver/main" >&2; return 1; }
  fi
  local i
  for i in $(seq 1 30); do
    pg_isready -q -h "$host" -p "$port" && break
    sleep 1
  done
  pg_isready -q -h "$host" -p "$port" || { echo "postgres: not accepting connections on $host:$port" >&2; return 1; }

  if acds_pg_ok "${trust_dsn%/*}/postgres?sslmode=disable"; then
    if [ "$(psql "${trust_dsn%/*}/postgres?sslmode=disable" -XAtqc "SELECT count(*) FROM pg_database WHERE datname = '${db}'")" = 0 ]; then
      psql "${trust_dsn%/*}/postgres?sslmode=disable" -XAtqc "CREATE DATABASE ${db}" >/dev/null || return 1
    fi
    export ACDS_TEST_POSTGRES="$trust_dsn"
    echo "postgres: using $trust_dsn"
    return 0
  fi

  # Password authentication on TCP (the Debian default): a CI role with a
  # random password, regenerated on every run.
  local pw
  pw="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
  acds_as_postgres psql -XAtq -v ON_ERROR_STOP=1 -v pw="$pw" >/dev/null <<'SQL' ||
    { echo "postgres: cannot create the acds_ci role and the test database" >&2; return 1; }
SELECT 'CREATE ROLE acds_ci LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'acds_ci') \gexec
ALTER ROLE acds_ci LOGIN PASSWORD :'pw';
SELECT 'CREATE DATABASE test OWNER acds_ci' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'test') \gexec
ALTER DATABASE test OWNER TO acds_ci;
SQL
  local dsn="postgres://acds_ci:${pw}@${host}:${port}/${db}?sslmode=disable"
  acds_pg_ok "$dsn" || { echo "postgres: cannot log in as acds_ci on $host:$port" >&2; return 1; }
  export ACDS_TEST_POSTGRES="$dsn"
  echo "postgres: using role acds_ci on $host:$port/$db"
}

acds_ci_postgres
unset -f acds_ci_postgres acds_pg_ok acds_as_root acds_as_postgres

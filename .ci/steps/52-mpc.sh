#!/usr/bin/env bash
# mpctls/mpc, the two-party computation engine: its tests under the race
# detector (the session's reader and writer goroutines), then short fuzz
# runs of every parser of its wire. Run from the repo root.
set -euo pipefail

echo "-- mpc: race detector"
go test -count=1 -race ./mpctls/mpc/...

echo "-- mpc: fuzz"
bash .ci/fuzz.sh FuzzBaseOT ./mpctls/mpc/ot/ 15s
bash .ci/fuzz.sh FuzzExtension ./mpctls/mpc/ot/ 15s
bash .ci/fuzz.sh FuzzMessages ./mpctls/mpc/ectf/ 15s
bash .ci/fuzz.sh FuzzParse ./mpctls/mpc/ 15s
bash .ci/fuzz.sh FuzzPeer ./mpctls/mpc/ 15s

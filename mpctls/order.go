package mpctls

import "fmt"

// Order records the arrival order of a session's records as run lengths:
// Order[0] client→server records, then Order[1] server→client records, and
// so on, alternating (a session that starts with a server record would
// have Order[0] == 0, which never happens in TLS). The Merkle tree is over
// arrival order as the notary saw it, which the prover cannot observe
// itself, so the notary hands Order back with the statement; it is a few
// bytes per request/response exchange.
type Order []uint64

// Order returns the arrival order of the records added so far.
func (t *Transcript) Order() Order { return append(Order(nil), t.runs...) }

// Interleave merges the records of each direction (each in sequence order)
// into arrival order according to o. It fails with ErrSequence if the
// counts do not add up.
func Interleave(client, server []Record, o Order) ([]Record, error) {
	out := make([]Record, 0, len(client)+len(server))
	var ci, si int
	for i, n := range o {
		src, idx, dir := client, &ci, ClientToServer
		if i%2 == 1 {
			src, idx, dir = server, &si, ServerToClient
		}
		if n > uint64(len(src)-*idx) {
			return nil, fmt.Errorf("%w: order names more %s records than given", ErrSequence, dir)
		}
		for k := uint64(0); k < n; k++ {
			r := src[*idx]
			if r.Dir != dir || r.Seq != uint64(*idx) {
				return nil, &RecordError{Dir: r.Dir, Seq: r.Seq, Reason: "record out of place", Err: ErrSequence}
			}
			out = append(out, r)
			*idx++
		}
	}
	if ci != len(client) || si != len(server) {
		return nil, fmt.Errorf("%w: order covers %d+%d of %d+%d records", ErrSequence, ci, si, len(client), len(server))
	}
	return out, nil
}

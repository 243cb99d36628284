package fhirpath

import (
	"fmt"
	"math/big"
	"strconv"
)

// valueKey returns a string that two items share exactly when they are
// equal (=) with a known result: the identity used by union, distinct,
// intersect, exclude, subsetOf and repeat, in linear time.
func valueKey(v Value) string {
	s, ok := toSystem(v)
	if !ok {
		// A primitive without a value: only equal to itself.
		if n, isNode := v.(*Node); isNode {
			return fmt.Sprintf("E:%p", n.Value)
		}
		return "E:"
	}
	switch x := s.(type) {
	case Boolean:
		if x {
			return "B:1"
		}
		return "B:0"
	case String:
		return "S:" + string(x)
	case Integer:
		return "N:" + strconv.FormatInt(int64(x), 10) + "/1"
	case Decimal:
		return "N:" + x.rat().String()
	case Date:
		return "T:" + x.temporal.key()
	case DateTime:
		return "T:" + x.temporal.key()
	case Time:
		return "H:" + x.temporal.key()
	case Quantity:
		if u, ok := unitFactor(x.Unit); ok {
			return "Q:" + new(big.Rat).Mul(x.Value.rat(), u.factor).String() + " " + u.dim
		}
		return "Q:" + x.Value.rat().String() + " '" + x.Unit
	case TypeInfo:
		return "Y:" + x.Namespace + "." + x.Name
	case *Node:
		if b, err := nodeJSON(x); err == nil {
			return "J:" + x.Type + ":" + string(b)
		}
		return fmt.Sprintf("P:%p", x.Value)
	}
	return "?"
}

// key renders a date/time at its precision, in UTC when it has a zone;
// seconds and milliseconds count as one precision.
func (t temporal) key() string {
	if t.Precision >= Hour && t.HasZone {
		t = t.utc()
	}
	p := t.Precision
	if p == Second && t.Nanosecond == 0 {
		p = Millisecond
	}
	t.Precision = p
	t.fracDigits = 9
	return strconv.Itoa(int(p)) + t.dateString() + "T" + t.timeString()
}

// keyed is a set of value keys.
type keyed map[string]struct{}

func (k keyed) add(v Value) bool {
	key := valueKey(v)
	if _, ok := k[key]; ok {
		return false
	}
	k[key] = struct{}{}
	return true
}

func (k keyed) has(v Value) bool {
	_, ok := k[valueKey(v)]
	return ok
}

func keysOf(c Collection) keyed {
	k := make(keyed, len(c))
	for _, v := range c {
		k.add(v)
	}
	return k
}

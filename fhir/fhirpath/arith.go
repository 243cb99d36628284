package fhirpath

import (
	"math"
	"math/big"
	"time"
)

// arith applies + - * / div mod to two System values. A nil result is
// empty (division by zero, overflow).
func arith(op string, a, b Value, at int) (Value, error) {
	switch x := a.(type) {
	case Integer:
		if y, ok := b.(Integer); ok && op != "/" {
			return intArith(op, int64(x), int64(y)), nil
		}
		if isNumeric(b) {
			return decArith(op, toDecimal(a), toDecimal(b)), nil
		}
		if q, ok := b.(Quantity); ok && op == "*" {
			return Quantity{Value: toDecimal(a).mul(q.Value), Unit: q.Unit}, nil
		}
	case Decimal:
		if isNumeric(b) {
			return decArith(op, x, toDecimal(b)), nil
		}
		if q, ok := b.(Quantity); ok && op == "*" {
			return Quantity{Value: x.mul(q.Value), Unit: q.Unit}, nil
		}
	case String:
		if y, ok := b.(String); ok && op == "+" {
			if len(x)+len(y) > maxString {
				return nil, evalErr(ErrLimit, at, "string longer than %d bytes", maxString)
			}
			return x + y, nil
		}
	case Quantity:
		switch y := b.(type) {
		case Quantity:
			return quantityArith(op, x, y, at)
		case Integer, Decimal:
			switch op {
			case "*":
				return Quantity{Value: x.Value.mul(toDecimal(y)), Unit: x.Unit}, nil
			case "/":
				d, ok := x.Value.div(toDecimal(y))
				if !ok {
					return nil, nil
				}
				return Quantity{Value: d, Unit: x.Unit}, nil
			}
		}
	case Date, DateTime, Time:
		if q, ok := b.(Quantity); ok && (op == "+" || op == "-") {
			if op == "-" {
				q.Value = q.Value.neg()
			}
			return addDuration(a, q, at)
		}
	}
	return nil, evalErr(ErrEvaluation, at, "cannot apply '%s' to %s and %s", op, typeName(a), typeName(b))
}

func intArith(op string, x, y int64) Value {
	switch op {
	case "+":
		s := x + y
		if (s > x) != (y > 0) {
			return nil
		}
		return Integer(s)
	case "-":
		s := x - y
		if (s < x) != (y > 0) {
			return nil
		}
		return Integer(s)
	case "*":
		if x == 0 || y == 0 {
			return Integer(0)
		}
		p := x * y
		if p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
			return nil
		}
		return Integer(p)
	case "div":
		if y == 0 {
			return nil
		}
		return Integer(x / y)
	case "mod":
		if y == 0 {
			return nil
		}
		return Integer(x % y)
	}
	return nil
}

func decArith(op string, x, y Decimal) Value {
	switch op {
	case "+":
		return x.add(y)
	case "-":
		return x.sub(y)
	case "*":
		return x.mul(y)
	case "/":
		d, ok := x.div(y)
		if !ok {
			return nil
		}
		return d
	case "div":
		if y.rat().Sign() == 0 {
			return nil
		}
		q := new(big.Rat).Quo(x.rat(), y.rat())
		return Integer(new(big.Int).Quo(q.Num(), q.Denom()).Int64())
	case "mod":
		if y.rat().Sign() == 0 {
			return nil
		}
		q := new(big.Rat).Quo(x.rat(), y.rat())
		t := new(big.Rat).SetInt(new(big.Int).Quo(q.Num(), q.Denom()))
		r := new(big.Rat).Sub(x.rat(), t.Mul(t, y.rat()))
		return Decimal{r: r, scale: max(x.scale, y.scale)}
	}
	return nil
}

func quantityArith(op string, x, y Quantity, at int) (Value, error) {
	switch op {
	case "+", "-":
		if x.Unit != y.Unit {
			ux, ok1 := parseUCUM(x.Unit)
			uy, ok2 := parseUCUM(y.Unit)
			if !ok1 || !ok2 || ux.dim != uy.dim {
				return nil, evalErr(ErrEvaluation, at, "cannot add %s and %s", x.Unit, y.Unit)
			}
			v := new(big.Rat).Mul(y.Value.rat(), uy.factor)
			v.Quo(v, ux.factor)
			y = Quantity{Value: Decimal{r: v, scale: max(y.Value.scale, x.Value.scale)}, Unit: x.Unit}
		}
		if op == "+" {
			return Quantity{Value: x.Value.add(y.Value), Unit: x.Unit}, nil
		}
		return Quantity{Value: x.Value.sub(y.Value), Unit: x.Unit}, nil
	case "*":
		return Quantity{Value: x.Value.mul(y.Value), Unit: combineUnits(x.Unit, ".", y.Unit)}, nil
	case "/":
		d, ok := x.Value.div(y.Value)
		if !ok {
			return nil, nil
		}
		if x.Unit == y.Unit {
			return Quantity{Value: d, Unit: "1"}, nil
		}
		return Quantity{Value: d, Unit: combineUnits(x.Unit, "/", y.Unit)}, nil
	}
	return nil, evalErr(ErrEvaluation, at, "cannot apply '%s' to quantities", op)
}

func combineUnits(a, op, b string) string {
	if a == "1" {
		if op == "." {
			return b
		}
	}
	if b == "1" {
		return a
	}
	return a + op + b
}

// addDuration adds a time-valued quantity to a date, date-time or time.
func addDuration(v Value, q Quantity, at int) (Value, error) {
	var t temporal
	kind := 0
	switch x := v.(type) {
	case Date:
		t = x.temporal
	case DateTime:
		t, kind = x.temporal, 1
	case Time:
		t, kind = x.temporal, 2
	}
	unit := q.Unit
	switch unit {
	case "a", "mo":
		// UCUM years and months are not calendar durations.
		return nil, evalErr(ErrEvaluation, at, "cannot add '%s' to a date: use a calendar duration (year, month)", unit)
	case "wk":
		unit = "week"
	case "d":
		unit = "day"
	case "h":
		unit = "hour"
	case "min":
		unit = "minute"
	case "s":
		unit = "second"
	case "ms":
		unit = "millisecond"
	}
	n := q.Value.truncInt().Int64()
	base := time.Date(t.Year, time.Month(t.Month), t.Day, t.Hour, t.Minute, t.Second, t.Nanosecond, time.UTC)
	if kind == 2 {
		base = time.Date(2000, 1, 1, t.Hour, t.Minute, t.Second, t.Nanosecond, time.UTC)
	}
	switch unit {
	case "year", "month":
		if kind == 2 {
			return nil, evalErr(ErrEvaluation, at, "cannot add %s to a time", unit)
		}
		months := n
		if unit == "year" {
			months = n * 12
		} else if t.Precision == Year {
			months = n / 12 * 12
		}
		y := t.Year + int(months/12)
		m := t.Month + int(months%12)
		if m > 12 {
			y, m = y+1, m-12
		} else if m < 1 {
			y, m = y-1, m+12
		}
		d := min(t.Day, daysIn(y, m))
		t.Year, t.Month, t.Day = y, m, d
	case "week", "day", "hour", "minute", "second", "millisecond":
		var dur time.Duration
		switch unit {
		case "week":
			dur = time.Duration(n) * 7 * 24 * time.Hour
		case "day":
			dur = time.Duration(n) * 24 * time.Hour
		case "hour":
			dur = time.Duration(n) * time.Hour
		case "minute":
			dur = time.Duration(n) * time.Minute
		case "second":
			// Whole seconds: a fraction of a second is dropped.
			dur = time.Duration(n) * time.Second
		case "millisecond":
			dur = time.Duration(n) * time.Millisecond
		}
		if kind == 0 && dur%(24*time.Hour) != 0 {
			dur = dur / (24 * time.Hour) * 24 * time.Hour
		}
		// Below the value's precision, whole units of its precision only.
		nt := base.Add(dur)
		if kind == 2 {
			nt = time.Date(2000, 1, 1, nt.Hour(), nt.Minute(), nt.Second(), nt.Nanosecond(), time.UTC)
		}
		t.Year, t.Month, t.Day = nt.Year(), int(nt.Month()), nt.Day()
		t.Hour, t.Minute, t.Second, t.Nanosecond = nt.Hour(), nt.Minute(), nt.Second(), nt.Nanosecond()
	default:
		return nil, evalErr(ErrEvaluation, at, "cannot add '%s' to a date or time", q.Unit)
	}
	switch kind {
	case 0:
		return Date{t}, nil
	case 1:
		return DateTime{t}, nil
	}
	return Time{t}, nil
}

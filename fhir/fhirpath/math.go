package fhirpath

import (
	"math"
	"math/big"
)

// numFn wraps a function of a single number (or quantity) input.
func numFn(min, max int, f func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error)) *funcDef {
	return &funcDef{min, max, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
		v, ok, err := singleton(t, n.at)
		if err != nil || !ok {
			return nil, err
		}
		switch v.(type) {
		case Integer, Decimal, Quantity:
		default:
			if n.name != "precision" && n.name != "lowBoundary" && n.name != "highBoundary" {
				return nil, evalErr(ErrEvaluation, n.at, "%s() needs a number, not %s", n.name, typeName(v))
			}
		}
		return f(e, n, v, sc)
	}}
}

// floatFn applies a float64 function, giving a Decimal; NaN and infinities
// are empty.
func floatFn(f func(float64) float64) *funcDef {
	return numFn(0, 0, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
		if _, ok := v.(Quantity); ok {
			return nil, evalErr(ErrEvaluation, n.at, "%s() needs a number", n.name)
		}
		d, ok := decFromFloat(f(toDecimal(v).Float64()))
		if !ok {
			return nil, nil
		}
		return Collection{d}, nil
	})
}

func bigToInteger(b *big.Int) Collection {
	if !b.IsInt64() {
		return nil
	}
	return Collection{Integer(b.Int64())}
}

func mathFuncs() map[string]*funcDef {
	return map[string]*funcDef{
		"abs": numFn(0, 0, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
			switch x := v.(type) {
			case Integer:
				if x < 0 {
					x = -x
				}
				return Collection{x}, nil
			case Decimal:
				return Collection{Decimal{r: new(big.Rat).Abs(x.rat()), scale: x.scale}}, nil
			case Quantity:
				return Collection{Quantity{Value: Decimal{r: new(big.Rat).Abs(x.Value.rat()), scale: x.Value.scale}, Unit: x.Unit}}, nil
			}
			return nil, nil
		}),
		"ceiling": numFn(0, 0, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
			if _, ok := v.(Quantity); ok {
				return nil, evalErr(ErrEvaluation, n.at, "ceiling() needs a number")
			}
			d := toDecimal(v)
			f := d.floorInt()
			if !d.isInt() {
				f.Add(f, big.NewInt(1))
			}
			return bigToInteger(f), nil
		}),
		"floor": numFn(0, 0, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
			if _, ok := v.(Quantity); ok {
				return nil, evalErr(ErrEvaluation, n.at, "floor() needs a number")
			}
			return bigToInteger(toDecimal(v).floorInt()), nil
		}),
		"truncate": numFn(0, 0, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
			if _, ok := v.(Quantity); ok {
				return nil, evalErr(ErrEvaluation, n.at, "truncate() needs a number")
			}
			return bigToInteger(toDecimal(v).truncInt()), nil
		}),
		"round": numFn(0, 1, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
			if _, ok := v.(Quantity); ok {
				return nil, evalErr(ErrEvaluation, n.at, "round() needs a number")
			}
			p := int64(0)
			if len(n.args) == 1 {
				var ok bool
				var err error
				if p, ok, err = e.argInt(n, 0, sc); err != nil || !ok {
					return nil, err
				}
				if p < 0 || p > 28 {
					return nil, evalErr(ErrEvaluation, n.at, "round() precision %d out of range", p)
				}
			}
			return Collection{toDecimal(v).roundTo(int(p))}, nil
		}),
		"exp": floatFn(math.Exp),
		"ln":  floatFn(math.Log),
		"sqrt": floatFn(func(x float64) float64 {
			if x < 0 {
				return math.NaN()
			}
			return math.Sqrt(x)
		}),
		"log": numFn(1, 1, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
			b, ok, err := e.argSingle(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			if !isNumeric(b) || !isNumeric(v) {
				return nil, evalErr(ErrEvaluation, n.at, "log() needs numbers")
			}
			d, ok := decFromFloat(math.Log(toDecimal(v).Float64()) / math.Log(toDecimal(b).Float64()))
			if !ok {
				return nil, nil
			}
			return Collection{d}, nil
		}),
		"power": numFn(1, 1, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
			p, ok, err := e.argSingle(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			if !isNumeric(p) || !isNumeric(v) {
				return nil, evalErr(ErrEvaluation, n.at, "power() needs numbers")
			}
			if x, ok := v.(Integer); ok {
				if y, ok := p.(Integer); ok && y >= 0 {
					bits := int64(big.NewInt(int64(x)).BitLen())
					if bits > 1 && y > 64 || (bits-1)*int64(y) > 64 {
						return nil, nil // beyond System.Integer
					}
					r := new(big.Int).Exp(big.NewInt(int64(x)), big.NewInt(int64(y)), nil)
					return bigToInteger(r), nil
				}
			}
			f := math.Pow(toDecimal(v).Float64(), toDecimal(p).Float64())
			d, ok := decFromFloat(f)
			if !ok {
				return nil, nil
			}
			return Collection{d}, nil
		}),
		"precision": numFn(0, 0, func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
			switch x := v.(type) {
			case Decimal:
				return Collection{Integer(x.scale)}, nil
			case Integer:
				return Collection{Integer(0)}, nil
			case Date:
				return Collection{Integer(digitsOf(x.Precision, false))}, nil
			case DateTime:
				return Collection{Integer(digitsOf(x.Precision, false))}, nil
			case Time:
				return Collection{Integer(digitsOf(x.Precision, true))}, nil
			}
			return nil, evalErr(ErrEvaluation, n.at, "precision() of %s", typeName(v))
		}),
		"lowBoundary":  numFn(0, 1, boundary(false)),
		"highBoundary": numFn(0, 1, boundary(true)),
		"comparable": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			v, ok, err := singleton(t, n.at)
			if err != nil || !ok {
				return nil, err
			}
			o, ok, err := e.argSingle(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			a, ok1 := v.(Quantity)
			b, ok2 := o.(Quantity)
			if !ok1 || !ok2 {
				return nil, evalErr(ErrEvaluation, n.at, "comparable() needs quantities")
			}
			ua, ok1 := unitFactor(a.Unit)
			ub, ok2 := unitFactor(b.Unit)
			if !ok1 || !ok2 {
				return boolColl(a.Unit == b.Unit), nil
			}
			return boolColl(ua.dim == ub.dim), nil
		}},
	}
}

// digitsOf is the precision() of a date/time precision.
func digitsOf(p Precision, isTime bool) int {
	if isTime {
		return [...]int{0, 0, 0, 0, 2, 4, 6, 9}[p]
	}
	return [...]int{0, 4, 6, 8, 10, 12, 14, 17}[p]
}

func precisionOfDigits(d int, isTime bool) (Precision, bool) {
	first := Year
	if isTime {
		first = Hour
	}
	for p := first; p <= Millisecond; p++ {
		if digitsOf(p, isTime) == d {
			return p, true
		}
	}
	return 0, false
}

func boundary(high bool) func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
	return func(e *evaluator, n *callNode, v Value, sc *scope) (Collection, error) {
		p := int64(-1)
		if len(n.args) == 1 {
			var ok bool
			var err error
			if p, ok, err = e.argInt(n, 0, sc); err != nil || !ok {
				return nil, err
			}
			if p < 0 {
				return nil, nil
			}
		}
		switch x := v.(type) {
		case Integer, Decimal:
			if p < 0 {
				p = 8
			}
			if p > 28 {
				return nil, nil
			}
			d := toDecimal(x)
			half := Decimal{r: new(big.Rat).SetFrac(big.NewInt(5), pow10(d.scale+1)), scale: d.scale + 1}
			var b Decimal
			if high {
				b = d.add(half)
			} else {
				b = d.sub(half)
			}
			m := new(big.Rat).Mul(b.rat(), new(big.Rat).SetInt(pow10(int(p))))
			q, r := new(big.Int).DivMod(m.Num(), m.Denom(), new(big.Int))
			if high && r.Sign() != 0 {
				q.Add(q, big.NewInt(1))
			}
			return Collection{Decimal{r: new(big.Rat).SetFrac(q, pow10(int(p))), scale: int(p)}}, nil
		case Date:
			return dateBoundary(x.temporal, p, high, 0)
		case DateTime:
			return dateBoundary(x.temporal, p, high, 1)
		case Time:
			return dateBoundary(x.temporal, p, high, 2)
		case Quantity:
			r, err := boundary(high)(e, n, x.Value, sc)
			if err != nil || len(r) == 0 {
				return nil, err
			}
			return Collection{Quantity{Value: r[0].(Decimal), Unit: x.Unit}}, nil
		}
		return nil, evalErr(ErrEvaluation, n.at, "%s() of %s", n.name, typeName(v))
	}
}

func dateBoundary(t temporal, digits int64, high bool, kind int) (Collection, error) {
	target := Millisecond
	if kind == 0 {
		target = Day
	}
	if kind == 1 && t.Precision == Hour {
		// A date-time given to the hour is read as given to the minute.
		t.Precision = Minute
	}
	if digits >= 0 {
		p, ok := precisionOfDigits(int(digits), kind == 2)
		if !ok || kind == 0 && p > Day {
			return nil, nil
		}
		target = p
	}
	if target < t.Precision {
		// Truncation to a coarser precision.
		t.Precision = target
		return Collection{wrapTemporal(t, kind)}, nil
	}
	if high {
		if t.Precision < Month {
			t.Month = 12
		}
		if t.Precision < Day {
			t.Day = daysIn(t.Year, t.Month)
		}
		if t.Precision < Hour {
			t.Hour = 23
		}
		if t.Precision < Minute {
			t.Minute = 59
		}
		if t.Precision < Second {
			t.Second = 59
		}
		if t.Precision < Millisecond {
			t.Nanosecond = 999e6
		}
	} else {
		if t.Precision < Month {
			t.Month = 1
		}
		if t.Precision < Day {
			t.Day = 1
		}
		if t.Precision < Hour {
			t.Hour, t.Minute, t.Second, t.Nanosecond = 0, 0, 0, 0
		}
	}
	if target >= Millisecond {
		t.fracDigits = 3
	}
	if kind == 1 && target >= Hour && !t.HasZone {
		t.HasZone = true
		if high {
			t.ZoneOffset = -12 * 3600
		} else {
			t.ZoneOffset = 14 * 3600
		}
	}
	t.Precision = target
	return Collection{wrapTemporal(t, kind)}, nil
}

func wrapTemporal(t temporal, kind int) Value {
	switch kind {
	case 0:
		return Date{t}
	case 1:
		return DateTime{t}
	}
	return Time{t}
}

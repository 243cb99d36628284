package fhirpath

import (
	"errors"
	"fmt"
)

// The classes of error. Every error this package returns matches one of
// them with errors.Is; the structs below carry the detail.
var (
	// ErrSyntax: the expression is not valid FHIRPath (a *SyntaxError).
	ErrSyntax = errors.New("fhirpath: syntax error")
	// ErrSemantic: the expression parses but cannot be evaluated as
	// written: an unknown function, a wrong number of arguments, an unknown
	// type or environment variable (an *EvalError).
	ErrSemantic = errors.New("fhirpath: semantic error")
	// ErrEvaluation: evaluation failed on this input, for example a
	// collection of several items where one is required, or arguments of
	// the wrong type (an *EvalError).
	ErrEvaluation = errors.New("fhirpath: evaluation error")
	// ErrLimit: evaluation exceeded Options.MaxSteps or
	// Options.MaxResultItems, or the expression exceeded Options.MaxLength
	// or MaxDepth (an *EvalError or *SyntaxError).
	ErrLimit = errors.New("fhirpath: limit exceeded")
	// ErrNotSupported: the expression uses something this engine does not
	// implement (a terminology operation over a value set it does not hold,
	// a unit it cannot convert…); it fails rather than answer wrongly (an
	// *EvalError).
	ErrNotSupported = errors.New("fhirpath: not supported")
)

// SyntaxError is a parse error at a position of the expression.
type SyntaxError struct {
	// Offset is the byte offset of the error in the expression.
	Offset int
	// Line and Column are 1-based; Column counts bytes.
	Line, Column int
	// Msg says what was wrong.
	Msg string
	// class is ErrSyntax or ErrLimit.
	class error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("fhirpath: %d:%d (offset %d): %s", e.Line, e.Column, e.Offset, e.Msg)
}

// Unwrap returns ErrSyntax (or ErrLimit for an expression over the limits).
func (e *SyntaxError) Unwrap() error {
	if e.class == nil {
		return ErrSyntax
	}
	return e.class
}

// EvalError is an error found while checking or evaluating an expression.
type EvalError struct {
	// Class is ErrSemantic, ErrEvaluation, ErrLimit or ErrNotSupported.
	Class error
	// Offset is the byte offset in the expression of the part that failed
	// (-1 when unknown).
	Offset int
	// Msg says what was wrong.
	Msg string
	// Err is an underlying error, if any (such as context.DeadlineExceeded).
	Err error
}

func (e *EvalError) Error() string {
	s := e.Class.Error()
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", e.Offset)
	}
	s += ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the class and the underlying error.
func (e *EvalError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Class, e.Err}
	}
	return []error{e.Class}
}

func newSyntaxError(src string, off int, format string, args ...any) *SyntaxError {
	line, col := lineCol(src, off)
	return &SyntaxError{Offset: off, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

func lineCol(src string, off int) (int, int) {
	if off > len(src) {
		off = len(src)
	}
	line, col := 1, 1
	for i := 0; i < off; i++ {
		if src[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func evalErr(class error, off int, format string, args ...any) *EvalError {
	return &EvalError{Class: class, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

package route

import (
	"math/big"
	"testing"
)

func TestSharesAddPrintAndCompare(t *testing.T) {
	s := Shares{}
	s.Add("10.0.0.2:80", big.NewRat(1, 3))
	s.Add("10.0.0.1:80", big.NewRat(1, 3))
	s.Add("10.0.0.1:80", big.NewRat(1, 3))
	s.Add(Drop, new(big.Rat)) // zero weight: no outcome
	if got := s.String(); got != "{10.0.0.1:80: 2/3, 10.0.0.2:80: 1/3}" {
		t.Errorf("String: %s", got)
	}
	long := Shares{"a:1": big.NewRat(3333333333, 10000000000)}
	if got := long.String(); got != "{a:1: 0.333333333300}" {
		t.Errorf("a long fraction prints as a decimal: %s", got)
	}
	o := Shares{"10.0.0.1:80": big.NewRat(2, 3), "10.0.0.2:80": big.NewRat(1, 3)}
	if !s.Within(o, new(big.Rat)) {
		t.Error("equal shares must compare equal exactly")
	}
	o["10.0.0.2:80"] = big.NewRat(1, 3+1)
	if s.Within(o, big.NewRat(1, 100)) || !s.Within(o, big.NewRat(1, 10)) {
		t.Error("Within must honour its tolerance")
	}
	delete(o, "10.0.0.2:80")
	if s.Within(o, big.NewRat(1, 1)) {
		t.Error("a missing outcome is never within tolerance")
	}
}

package ledger

import (
	"fmt"
	"strconv"
	"strings"
)

// Price is what a model costs per million input and output tokens (in the team's currency).
type Price struct{ Input, Output float64 }

// Prices are the price table, by model.
type Prices map[string]Price

// ParsePrices reads entries model=input/output, a comma or whitespace apart
// ("gpt-4o=2.50/10, gpt-4o-mini=0.15/0.60").
func ParsePrices(s string) (Prices, error) {
	p := Prices{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		model, rates, ok := strings.Cut(f, "=")
		in, out, ok2 := strings.Cut(rates, "/")
		if !ok || !ok2 || model == "" {
			return nil, fmt.Errorf("price %q: want model=input/output per million tokens", f)
		}
		pi, err1 := strconv.ParseFloat(in, 64)
		po, err2 := strconv.ParseFloat(out, 64)
		if err1 != nil || err2 != nil || pi < 0 || po < 0 {
			return nil, fmt.Errorf("price %q: the prices are numbers, such as 2.50/10", f)
		}
		p[model] = Price{pi, po}
	}
	return p, nil
}

// Cost is what t's tokens of model cost, and whether the table has its price.
func (p Prices) Cost(model string, t Totals) (float64, bool) {
	pr, ok := p[model]
	if !ok {
		return 0, false
	}
	return (float64(t.Input)*pr.Input + float64(t.Output)*pr.Output) / 1e6, true
}

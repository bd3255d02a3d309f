package main

import (
	"math"
	"testing"
)

// quantile interpolates between ranks: the median of an even count is the
// mean of the middle two, and the quartiles of four values are not the
// smallest and the median.
func TestQuantile(t *testing.T) {
	for _, c := range []struct {
		xs      []float64
		p, want float64
	}{
		{[]float64{4, 1, 3, 2}, 0.5, 2.5},
		{[]float64{4, 1, 3, 2}, 0.25, 1.75},
		{[]float64{4, 1, 3, 2}, 0.75, 3.25},
		{[]float64{5, 1, 3}, 0.5, 3},
		{[]float64{7}, 0.25, 7},
		{nil, 0.5, 0},
	} {
		if got := quantile(c.xs, c.p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
		}
	}
}

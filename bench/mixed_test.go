package main

import "testing"

func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		held       [][2]int64
		violations int64
		most       int64
	}{
		{"none", nil, 0, 1},
		{"one after another", [][2]int64{{0, 10}, {10, 20}, {25, 30}}, 0, 1},
		{"out of order, apart", [][2]int64{{25, 30}, {0, 10}, {10, 20}}, 0, 1},
		{"second inside the first", [][2]int64{{0, 10}, {5, 6}}, 1, 2},
		{"three at once", [][2]int64{{0, 10}, {1, 10}, {2, 3}, {11, 12}}, 2, 3},
		{"a long hold under short ones", [][2]int64{{0, 100}, {10, 20}, {30, 40}}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, m := overlaps(tc.held)
			if v != tc.violations || m != tc.most {
				t.Errorf("overlaps(%v) = %d, %d; want %d, %d", tc.held, v, m, tc.violations, tc.most)
			}
		})
	}
}

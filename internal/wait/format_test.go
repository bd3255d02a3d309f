package wait

import (
	"math/big"
	"testing"
	"time"
)

// oldRedisTimeoutMS is how Redis before 7.0.8 read a BLPOP timeout:
// (long long)(strtold(s) * 1000.0), truncated (redis#11687). A result of 0
// means "block forever". big.Float at 64 bits of mantissa stands in for the
// x86 long double.
func oldRedisTimeoutMS(t *testing.T, s string) int64 {
	t.Helper()
	f, _, err := big.ParseFloat(s, 10, 64, big.ToNearestEven)
	if err != nil {
		t.Fatalf("timeout %q does not parse: %v", s, err)
	}
	f.SetMode(big.ToNearestEven).Mul(f, big.NewFloat(1000).SetPrec(64))
	ms, _ := f.Int64() // truncates toward zero, as the C cast does
	return ms
}

// No BLPOP timeout that formatSeconds renders blocks forever on an older
// Redis, and none is shorter than asked (a waiter must not wake before
// the holder's key expires, or spin).
func TestFormatSecondsNeverRoundsToZero(t *testing.T) {
	for d := time.Duration(-time.Millisecond); d <= 20*time.Millisecond; d += 10 * time.Microsecond {
		s := formatSeconds(d)
		ms := oldRedisTimeoutMS(t, s)
		if ms < 1 {
			t.Fatalf("formatSeconds(%v) = %q, which Redis < 7.0.8 reads as %d ms (block forever)", d, s, ms)
		}
		if got := time.Duration(ms) * time.Millisecond; got < d-time.Millisecond {
			t.Fatalf("formatSeconds(%v) = %q: %v, shorter than asked", d, s, got)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.002"}, {time.Millisecond, "0.002"}, {2 * time.Millisecond, "0.002"},
		{2*time.Millisecond + time.Nanosecond, "0.003"}, {250 * time.Millisecond, "0.250"},
		{2 * time.Second, "2.000"}, {1500 * time.Millisecond, "1.500"},
	} {
		if got := formatSeconds(tc.d); got != tc.want {
			t.Errorf("formatSeconds(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	// The check itself catches the old rendering: "0.001" truncates to 0.
	if ms := oldRedisTimeoutMS(t, "0.001"); ms != 0 {
		t.Fatalf("the emulation reads \"0.001\" as %d ms; Redis < 7.0.8 read 0", ms)
	}
}

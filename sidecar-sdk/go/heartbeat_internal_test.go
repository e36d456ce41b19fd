package kplug

import (
	"math"
	"testing"
	"time"
)

func TestBackoffDoublesFrom100msAndIsCappedAtTheInterval(t *testing.T) {
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, base := range want {
		attempt := i + 1
		base *= time.Millisecond
		if got := backoffDelay(attempt, time.Second, 0); got != base {
			t.Errorf("backoffDelay(%d, 1s, no jitter) = %v, want %v", attempt, got, base)
		}
		// Jitter shortens by at most 10 %, never lengthens (the protocol's rule).
		if got := backoffDelay(attempt, time.Second, 0.999999); got > base || got < base-base/10 {
			t.Errorf("backoffDelay(%d, 1s, max jitter) = %v, want within [%v, %v]", attempt, got, base-base/10, base)
		}
	}
}

func TestBackoffDoesNotOverflowAfterALongOutage(t *testing.T) {
	for _, attempt := range []int{31, 32, 33, 63, 64, 1000, math.MaxInt} {
		if got := backoffDelay(attempt, 5*time.Second, 0); got != 5*time.Second {
			t.Errorf("backoffDelay(%d, 5s) = %v, want the 5s cap", attempt, got)
		}
	}
	if got := backoffDelay(1000, time.Duration(math.MaxInt64), 0); got <= 0 {
		t.Errorf("backoffDelay(1000, max) = %v: overflowed", got)
	}
}

func TestBackoffJitterIsRandomAndBounded(t *testing.T) {
	h := newHeartbeater("unused", nil, time.Second, nil)
	seen := map[time.Duration]bool{}
	for range 50 {
		d := backoffDelay(3, time.Second, h.randomUnit())
		if d < 360*time.Millisecond || d > 400*time.Millisecond {
			t.Fatalf("delay %v outside [360ms, 400ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("only %d different delays in 50 tries: the jitter is not random", len(seen))
	}
}

func TestInstanceIDsAreFreshUUIDv4s(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := newInstanceID()
		if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
			t.Fatalf("%q is not a UUID", id)
		}
		if id[14] != '4' || !containsByte("89ab", id[19]) {
			t.Fatalf("%q is not a version 4, variant 1 UUID", id)
		}
		if seen[id] {
			t.Fatalf("%q twice", id)
		}
		seen[id] = true
	}
}

func containsByte(s string, b byte) bool {
	for i := range len(s) {
		if s[i] == b {
			return true
		}
	}
	return false
}

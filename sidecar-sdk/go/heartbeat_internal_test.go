package kplug

import (
	"testing"
	"time"
)

func TestBackoffDoublesFrom100msAndIsCappedAtTheInterval(t *testing.T) {
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for failures, base := range want {
		base *= time.Millisecond
		if got := backoffDelay(failures, time.Second, 0); got != base {
			t.Errorf("backoffDelay(%d, 1s, no jitter) = %v, want %v", failures, got, base)
		}
		// Jitter adds at most 10 %, as in the Rust SDK.
		if got := backoffDelay(failures, time.Second, 0.999999); got < base || got > base+base/10 {
			t.Errorf("backoffDelay(%d, 1s, max jitter) = %v, want within [%v, %v]", failures, got, base, base+base/10)
		}
	}
}

func TestBackoffDoesNotOverflowAfterALongOutage(t *testing.T) {
	for _, failures := range []int{31, 32, 33, 63, 64, 1000} {
		if got := backoffDelay(failures, 5*time.Second, 0); got != 5*time.Second {
			t.Errorf("backoffDelay(%d, 5s) = %v, want the 5s cap", failures, got)
		}
	}
}

func TestBackoffJitterIsRandomAndBounded(t *testing.T) {
	h := newHeartbeater("unused", nil, time.Second, nil)
	seen := map[time.Duration]bool{}
	for range 50 {
		d := backoffDelay(2, time.Second, h.jitter())
		if d < 400*time.Millisecond || d > 440*time.Millisecond {
			t.Fatalf("delay %v outside [400ms, 440ms]", d)
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

package registry

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// uncomparable is a client whose dynamic type cannot be a map key.
type uncomparable struct {
	redis.UniversalClient
	_ []int
}

func TestKeyable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if !Keyable(c) {
		t.Error("Keyable(*redis.Client) = false")
	}
	if Keyable(uncomparable{UniversalClient: c}) {
		t.Error("Keyable(a struct holding a slice) = true; a Key of it would panic")
	}
	if Keyable(nil) {
		t.Error("Keyable(nil) = true")
	}
}

// Entries of one kind are apart from those of another for the same
// client and sub, and Range sees only its kind.
func TestKindsAreApart(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	a, b := new(int), new(int)
	ka, kb := Key{Kind: Runtime, Client: c}, Key{Kind: Tracker, Client: c}
	if _, loaded := LoadOrStore(ka, a); loaded {
		t.Fatal("a fresh key was loaded")
	}
	if v, loaded := LoadOrStore(kb, b); loaded || v != b {
		t.Fatalf("LoadOrStore(another kind) = %v, %v; want its own entry", v, loaded)
	}
	if v, loaded := LoadOrStore(ka, b); !loaded || v != a {
		t.Fatalf("LoadOrStore(again) = %v, %v; want the first entry", v, loaded)
	}
	seen := 0
	Range(Runtime, func(k Key, v any) bool {
		if k.Client == c {
			seen++
			if v != a {
				t.Errorf("Range(Runtime) gave %v", v)
			}
		}
		return true
	})
	if seen != 1 {
		t.Errorf("Range(Runtime) saw %d entries of the client, want 1", seen)
	}
	if CompareAndDelete(ka, b) {
		t.Error("CompareAndDelete with another value deleted")
	}
	if !CompareAndDelete(ka, a) || !CompareAndDelete(kb, b) {
		t.Error("CompareAndDelete of the entries failed")
	}
	if _, ok := Load(ka); ok {
		t.Error("the entry is still there")
	}
}

// Tune is per client, and its undo restores what was there, nested or not.
func TestTune(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	other := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer other.Close()
	undo1 := Tune(c, Tuning{Idle: time.Second})
	undo2 := Tune(c, Tuning{Patience: time.Minute})
	if got := TuningOf(c); got != (Tuning{Patience: time.Minute}) {
		t.Errorf("TuningOf = %+v after the second Tune", got)
	}
	if got := TuningOf(other); got != (Tuning{}) {
		t.Errorf("another client's tuning = %+v, want the defaults", got)
	}
	undo2()
	if got := TuningOf(c); got != (Tuning{Idle: time.Second}) {
		t.Errorf("TuningOf = %+v after undoing the second, want the first", got)
	}
	undo1()
	if got := TuningOf(c); got != (Tuning{}) {
		t.Errorf("TuningOf = %+v after undoing both, want the defaults", got)
	}
	if got := TuningOf(uncomparable{UniversalClient: c}); got != (Tuning{}) {
		t.Errorf("TuningOf(unkeyable) = %+v", got)
	}
}

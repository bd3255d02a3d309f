package main

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// Every contender of the no-server table completes its cycle against the
// in-process replier, and go-redis-lock's hold is a real one (its Lock
// reports it held between the two calls).
func TestNoServerRunsEveryContender(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range noServerContenders() {
		cpu, wall, err := noServerWindow(ctx, c, clientCfg{addr: "in-process:0", defaults: true, dial: fakeDial}, 50*time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cpu <= 0 || wall <= 0 {
			t.Fatalf("%s: CPU %v, wall %v per cycle", c.name, cpu, wall)
		}
		t.Logf("%s: CPU %v, wall %v per cycle", c.name, cpu, wall)
	}
}

// The replier's answers: each contender's commands get what an
// uncontended cycle gets from Redis; anything else an error reply.
func TestFakeReply(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"evalsha", "x", "3", "k1", "k2", "k3", "id", "10000", "1", "1"}, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"evalsha", "x", "3", "k1", "k2", "k3", "id", "1000", "100"}, ":0\r\n"},
		{[]string{"evalsha", "x", "1", "k", "v", "22", "10000"}, "+OK\r\n"}, // bsm/redislock's obtain
		{[]string{"evalsha", "x", "1", "k", "v"}, ":1\r\n"},
		{[]string{"SET", "k", "v", "NX", "PX", "10000"}, "+OK\r\n"},
		{[]string{"del", "k"}, ":1\r\n"},
		{[]string{"HELLO", "3"}, "-ERR unknown command 'HELLO'\r\n"},
		{[]string{"client", "id"}, "-ERR unknown command 'client'\r\n"},
	} {
		if got := fakeReply(c.args[:min(3, len(c.args))], len(c.args)); got != c.want {
			t.Errorf("fakeReply(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// The replier reads commands off a connection as go-redis writes them,
// lengths of several digits and arguments past the third included, and
// answers each, its buffers used again from one command to the next.
func TestServeFake(t *testing.T) {
	a, b := net.Pipe()
	go serveFake(b)
	defer a.Close()
	key := strings.Repeat("k", 120)
	cmd := "*10\r\n$7\r\nevalsha\r\n$1\r\nx\r\n$1\r\n3\r\n$120\r\n" + key + "\r\n$2\r\nk2\r\n$2\r\nk3\r\n$2\r\nid\r\n$5\r\n10000\r\n$1\r\n1\r\n$1\r\n1\r\n"
	r := bufio.NewReader(a)
	roundTrip := func() string {
		go a.Write([]byte(cmd))
		var got string
		for range 3 {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			got += line
		}
		return got
	}
	for i := range 3 {
		if got := roundTrip(); got != "*2\r\n:0\r\n:0\r\n" {
			t.Fatalf("command %d: reply %q", i, got)
		}
	}
}

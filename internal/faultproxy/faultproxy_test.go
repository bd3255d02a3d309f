package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo is a loopback server that echoes lines.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, timeout time.Duration) (string, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestFaults(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(t, c, r, time.Second); err != nil || got != "ping\n" {
		t.Fatalf("plain round trip = %q, %v", got, err)
	}

	p.SetLatency(50 * time.Millisecond)
	start := time.Now()
	if _, err := roundTrip(t, c, r, time.Second); err != nil || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("with 50ms latency each way: %v after %v, want >= 100ms", err, time.Since(start))
	}
	p.SetLatency(0)

	p.Blackhole(true)
	if _, err := roundTrip(t, c, r, 200*time.Millisecond); err == nil {
		t.Fatal("round trip through a blackhole succeeded")
	}
	if n := p.Held(); n != 1 {
		t.Fatalf("Held() = %d with one request in the blackhole, want 1", n)
	}
	p.Blackhole(false)
	// The held request is delivered once the blackhole heals.
	c.SetDeadline(time.Now().Add(time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after the blackhole: %q, %v", got, err)
	}

	p.DropNextReply()
	if _, err := roundTrip(t, c, r, time.Second); err == nil {
		t.Fatal("round trip with a dropped reply succeeded")
	}
}

func TestLoopbackOnly(t *testing.T) {
	if _, err := Start("192.0.2.1:6379"); err == nil {
		t.Fatal("Start accepted a target off loopback")
	}
}

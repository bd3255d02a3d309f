// Package faultproxy is a TCP proxy for tests that sits between a client
// and a server on loopback and injects faults: added latency, a dropped
// reply, and a blackhole that stops all traffic, or that of the
// connections that sent something.
package faultproxy

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"time"
)

// Proxy forwards every connection made to Addr to the target.
type Proxy struct {
	ln     net.Listener
	target string

	// mu guards the fields below.
	mu        sync.Mutex
	cond      *sync.Cond // broadcast when blackhole turns off or the proxy closes
	latency   time.Duration
	blackhole bool
	dropNext  bool
	held      int // chunks waiting for the blackhole to lift
	closed    bool
	conns     map[net.Conn]struct{}
	pairs     map[*pair]struct{}

	wg sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target, which must
// be a loopback address.
func Start(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, errors.New("faultproxy: target must be on loopback")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, pairs: map[*pair]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk of data, in both directions, by d.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// A pair is one proxied connection. Its fields are guarded by Proxy.mu.
type pair struct {
	seen  []byte // the first seenMax bytes its client sent
	holed bool   // its traffic is held (see BlackholeSenders)
}

const seenMax = 4 << 10

// BlackholeSenders stops (on) the forwarding, both ways, of the
// connections whose client has sent pattern in its first 4 KB, as a
// middlebox that drops a connection without a word: their data is held,
// not lost. Connections made later are not held. Off resumes them all.
func (p *Proxy) BlackholeSenders(pattern []byte, on bool) {
	p.mu.Lock()
	for pr := range p.pairs {
		pr.holed = on && bytes.Contains(pr.seen, pattern)
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Blackhole stops (on) or resumes (off) all forwarding: data is held, not
// lost, as on a partitioned network that heals.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Held returns how many chunks of data the blackhole holds: a request
// sent into it has reached the proxy once Held counts it.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// DropNextReply makes the proxy discard the next data the server sends and
// close that connection, as when a reply is lost with its connection: the
// request was executed, the client never hears of it.
func (p *Proxy) DropNextReply() {
	p.mu.Lock()
	p.dropNext = true
	p.mu.Unlock()
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		pr := &pair{}
		p.pairs[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(server, client, false, pr)
		go p.pipe(client, server, true, pr)
	}
}

// forward writes one chunk read from a side of pr to dst, after the
// faults: it waits out a blackhole, sleeps the latency, and reports false
// when the pipe is to end (the proxy closed, a dropped reply, a failed
// write).
func (p *Proxy) forward(dst net.Conn, chunk []byte, fromServer bool, pr *pair) bool {
	p.mu.Lock()
	if !fromServer && len(pr.seen) < seenMax {
		pr.seen = append(pr.seen, chunk[:min(len(chunk), seenMax-len(pr.seen))]...)
	}
	if (p.blackhole || pr.holed) && !p.closed {
		p.held++
		for (p.blackhole || pr.holed) && !p.closed {
			p.cond.Wait()
		}
		p.held--
	}
	latency, closed := p.latency, p.closed
	drop := fromServer && p.dropNext
	if drop {
		p.dropNext = false
	}
	p.mu.Unlock()
	if closed || drop {
		return false
	}
	if latency > 0 {
		time.Sleep(latency)
	}
	_, err := dst.Write(chunk)
	return err == nil
}

// pipe copies from src to dst chunk by chunk, applying the faults.
// fromServer marks the server-to-client direction.
func (p *Proxy) pipe(dst, src net.Conn, fromServer bool, pr *pair) {
	defer p.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		delete(p.pairs, pr)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.forward(dst, buf[:n], fromServer, pr) {
			return
		}
		if err != nil {
			return // EOF or a closed connection: close the other side too
		}
	}
}

package faultrun

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/netfault"
)

func nemesisConfig(seed uint64) *Config {
	c := &Config{Frontend: "x", WorkerCommand: []string{"x"}, Store: StoreRedis, Seed: seed}
	if err := c.defaults(); err != nil {
		panic(err)
	}
	return c
}

// TestNemesisDraw checks the nemesis's choices: a seed gives one sequence
// of faults (another seed another), every kind is drawn, and every fault
// keeps to its bounds — a short delay under NetworkShort, a middle one
// from NetworkShort to StartToClose, a long one from
// StartToClose (past the budget of a call before the body) to NetworkHold,
// and no fault held longer than NetworkHold.
func TestNemesisDraw(t *testing.T) {
	draws := func(seed uint64) []netFault {
		n := newNemesis(nemesisConfig(seed), nil, nil, "test")
		var fs []netFault
		for range 300 {
			fs = append(fs, n.draw())
		}
		return fs
	}
	a, b, other := draws(1), draws(1), draws(2)
	assert.Equal(t, a, b, "one seed, one sequence")
	assert.NotEqual(t, a, other, "another seed, another sequence")

	c := nemesisConfig(1)
	seen := map[string]int{}
	for _, f := range a {
		seen[f.kind]++
		assert.LessOrEqual(t, f.hold, c.NetworkHold, "%v", f)
		switch f.kind {
		case NetDelayShort:
			assert.True(t, f.delay > 0 && f.delay <= c.NetworkShort, "%v", f)
			assert.Positive(t, f.hold, "%v", f)
		case NetDelayMid:
			assert.True(t, f.delay >= c.NetworkShort && f.delay <= c.StartToClose, "%v", f)
			assert.GreaterOrEqual(t, f.hold, f.delay, "%v", f)
		case NetDelayLong:
			assert.True(t, f.delay >= c.StartToClose && f.delay <= c.NetworkHold, "%v", f)
			assert.Equal(t, f.delay, f.hold, "%v: a long delay lasts as long as it holds", f)
		case NetCutReply:
			assert.True(t, f.cuts >= 1 && f.cuts <= 3, "%v", f)
		case NetCutAll:
			assert.Zero(t, f.hold, "%v", f)
		default:
			assert.Positive(t, f.hold, "%v", f)
		}
	}
	for _, k := range NetFaults {
		assert.Positive(t, seen[k], "%s never drawn in %d faults", k, len(a))
	}
}

// TestNemesisHeals runs the nemesis on a proxy in front of an echo server
// for a while: it injects faults, counts them, writes its schedule, and
// when it stops the proxy forwards again at once.
func TestNemesisHeals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer func() { _ = c.Close() }(); _, _ = io.Copy(c, c) }()
		}
	}()
	p, err := netfault.Start(ln.Addr().String())
	require.NoError(t, err)
	defer func() { _ = p.Close() }()

	cfg := nemesisConfig(1)
	cfg.StartToClose, cfg.NetworkHold, cfg.NetworkShort, cfg.NetworkEvery =
		20*time.Millisecond, 40*time.Millisecond, 5*time.Millisecond, 10*time.Millisecond
	var schedule bufferWriter
	n := newNemesis(cfg, p, &schedule, "test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.run(ctx) }()
	time.Sleep(time.Second)
	cancel()
	<-done

	total := 0
	for _, c := range n.Counts() {
		total += c
	}
	assert.Greater(t, total, 3, "faults injected in a second")
	assert.NotEmpty(t, schedule.String(), "the schedule is written")

	// Healed: a new connection is accepted and answered at once.
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Write([]byte("ping\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err, "the proxy forwards after the nemesis stopped")
	assert.Equal(t, "ping\n", line)
}

// bufferWriter is a string buffer the nemesis may write to.
type bufferWriter struct{ b []byte }

func (w *bufferWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *bufferWriter) String() string              { return string(w.b) }

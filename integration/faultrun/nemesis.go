package faultrun

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tesserix/idempotency/internal/netfault"
)

// The network faults the nemesis injects between the workers and the store.
// Each heals (the proxy forwards normally again) within Config.NetworkHold.
const (
	// NetDelayShort holds every reply for less than any store call's budget
	// (at most NetworkShort): calls are slow, none should time out.
	NetDelayShort = "delay_short"
	// NetDelayMid holds every reply for about a store call's budget (from
	// NetworkShort to StartToClose): longer than what is left of an
	// attempt late in it, and than the Redis client's read timeout (1s),
	// shorter than a fresh attempt's deadline. Whether a call hears its
	// answer depends on when it was made.
	NetDelayMid = "delay_mid"
	// NetDelayLong holds every reply for longer than a store call's budget
	// (from StartToClose to NetworkHold): the store has done what it was
	// asked, the caller stops waiting before it hears so.
	NetDelayLong = "delay_long"
	// NetCutReply cuts the connections carrying the next few replies in the
	// middle of the reply: the first half arrives, then the connection is
	// closed.
	NetCutReply = "cut_reply"
	// NetStallUp holds every request, none lost, until the fault heals; the
	// requests then reach the store, maybe after their callers gave up.
	NetStallUp = "stall_up"
	// NetStallDown holds every reply, none lost, until the fault heals.
	NetStallDown = "stall_down"
	// NetCutAll closes every open connection at once, whatever is in flight.
	NetCutAll = "cut_all"
	// NetRefuse closes every new connection at once for a while; open ones
	// are left alone.
	NetRefuse = "refuse"
)

// NetFaults lists the network faults in the order the table prints them.
var NetFaults = []string{NetDelayShort, NetDelayMid, NetDelayLong, NetCutReply, NetStallUp, NetStallDown, NetCutAll, NetRefuse}

// netWeights is how often each fault is drawn, relative to the others:
// the faults that lose or hold an answer (the paths a kill never reaches)
// twice as often as the rest.
var netWeights = map[string]int{
	NetDelayShort: 2, NetDelayMid: 2, NetDelayLong: 2, NetCutReply: 2,
	NetStallUp: 1, NetStallDown: 1, NetCutAll: 1, NetRefuse: 1,
}

// netFault is one fault the nemesis drew: what, how strong, how long
// before it heals.
type netFault struct {
	kind  string
	delay time.Duration // the reply delay (delay faults)
	cuts  int           // replies cut (cut_reply)
	hold  time.Duration // how long the fault stays before it heals
}

func (f netFault) String() string {
	switch f.kind {
	case NetDelayShort, NetDelayMid, NetDelayLong:
		return fmt.Sprintf("%s: replies held %v, for %v", f.kind, f.delay, f.hold)
	case NetCutReply:
		return fmt.Sprintf("%s: the next %d replies cut halfway, for at most %v", f.kind, f.cuts, f.hold)
	case NetCutAll:
		return f.kind
	default:
		return fmt.Sprintf("%s: for %v", f.kind, f.hold)
	}
}

// nemesis draws network faults from its own random source (seeded by the
// run's seed, so a seed gives the same sequence of faults) and applies them
// to the proxy between the workers and the store, one at a time, each
// healed before the next pause.
type nemesis struct {
	proxy *netfault.Proxy
	rng   *rand.Rand
	cfg   *Config
	log   io.Writer // the schedule, one time-stamped line per fault
	label string

	mu     sync.Mutex
	counts map[string]int
}

func newNemesis(cfg *Config, proxy *netfault.Proxy, log io.Writer, label string) *nemesis {
	return &nemesis{
		proxy:  proxy,
		rng:    rand.New(rand.NewPCG(cfg.Seed^0x6e656d65, cfg.Seed^0x73697321)),
		cfg:    cfg,
		log:    log,
		label:  label,
		counts: map[string]int{},
	}
}

// between draws a duration in [lo, hi].
func (n *nemesis) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)+1))
}

// draw picks the next fault.
func (n *nemesis) draw() netFault {
	total := 0
	for _, k := range NetFaults {
		total += netWeights[k]
	}
	pick := n.rng.IntN(total)
	kind := NetFaults[0]
	for _, k := range NetFaults {
		if pick < netWeights[k] {
			kind = k
			break
		}
		pick -= netWeights[k]
	}
	c := n.cfg
	f := netFault{kind: kind}
	switch kind {
	case NetDelayShort:
		f.delay = n.between(10*time.Millisecond, c.NetworkShort)
		f.hold = n.between(c.NetworkHold/4, c.NetworkHold)
	case NetDelayMid:
		f.delay = n.between(c.NetworkShort, c.StartToClose)
		f.hold = n.between(max(f.delay, c.NetworkHold/4), c.NetworkHold)
	case NetDelayLong:
		// Held past the budget of the call that waits for it: the
		// activity's deadline for the calls before the body, StoreTimeout
		// for those after it when it is shorter. The fault lasts as long
		// as the delay, so the first replies held are held all of it.
		f.delay = n.between(c.StartToClose, c.NetworkHold)
		f.hold = f.delay
	case NetCutReply:
		f.cuts = 1 + n.rng.IntN(3)
		f.hold = n.between(c.NetworkHold/4, c.NetworkHold)
	case NetStallUp, NetStallDown:
		f.hold = n.between(c.NetworkHold/8, c.NetworkHold)
	case NetRefuse:
		f.hold = n.between(c.NetworkHold/8, c.NetworkHold/2)
	}
	return f
}

// run injects faults until ctx ends, then heals the proxy. The pause before
// each fault is drawn between half and one and a half NetworkEvery.
func (n *nemesis) run(ctx context.Context) {
	defer n.proxy.Heal()
	for {
		pause := n.between(n.cfg.NetworkEvery/2, n.cfg.NetworkEvery*3/2)
		f := n.draw()
		if !sleepCtx(ctx, pause) {
			return
		}
		n.apply(f)
		n.mu.Lock()
		n.counts[f.kind]++
		n.mu.Unlock()
		n.logf("%s", f)
		healed := sleepCtx(ctx, f.hold)
		n.heal(f)
		if f.kind != NetCutAll {
			n.logf("%s healed", f.kind)
		}
		if !healed {
			return
		}
	}
}

func (n *nemesis) apply(f netFault) {
	p := n.proxy
	switch f.kind {
	case NetDelayShort, NetDelayMid, NetDelayLong:
		p.SetDelay(netfault.Down, f.delay)
	case NetCutReply:
		p.CutNext(netfault.Down, f.cuts)
	case NetStallUp:
		p.Stall(netfault.Up)
	case NetStallDown:
		p.Stall(netfault.Down)
	case NetCutAll:
		p.CutAll()
	case NetRefuse:
		p.Refuse(true)
	}
}

func (n *nemesis) heal(f netFault) {
	switch f.kind {
	case NetStallUp:
		n.proxy.Resume(netfault.Up)
	case NetStallDown:
		n.proxy.Resume(netfault.Down)
	case NetCutAll:
	default:
		n.proxy.Heal()
	}
}

func (n *nemesis) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if n.log != nil {
		_, _ = fmt.Fprintf(n.log, "%s %s\n", time.Now().Format(time.RFC3339Nano), line)
	}
	n.cfg.Logf("%s: network: %s", n.label, line)
}

// Counts returns how many faults of each kind were injected.
func (n *nemesis) Counts() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]int, len(n.counts))
	for k, v := range n.counts {
		out[k] = v
	}
	return out
}

// sleepCtx sleeps d and reports true, or reports false at once when ctx
// ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

package faultrun

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Entry kinds. KindSent and KindAnswered are not effects: they bracket a
// charge request while the downstream works on it, as a payment provider
// knows a request under an idempotency key is in progress (Stripe answers
// such a lookup with 409 Conflict).
const (
	KindCharge   = "charge"
	KindReserve  = "reserve"
	KindSent     = "sent"
	KindAnswered = "answered"
)

// Entry is one effect a downstream applied.
type Entry struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
	// IKey is the idempotency key the body ran under, which a probe asks by.
	IKey    string `json:"ikey,omitempty"`
	Effect  string `json:"effect"`
	Request string `json:"request"`
	PID     int    `json:"pid"`
}

// Ledger is the downstream's own record of the effects it applied: an
// append-only file per worker process, each line written and fsynced before
// the body answers. It lives outside the store under test, so no store
// restart can touch it; a SIGKILL can at worst cut the last line short,
// which Merge ignores (that effect's body never answered).
type Ledger struct {
	mu  sync.Mutex
	f   *os.File
	pid int
}

// OpenLedger opens (creating it) this process's ledger file in dir.
func OpenLedger(dir string) (*Ledger, error) {
	pid := os.Getpid()
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("ledger-%d.jsonl", pid)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Ledger{f: f, pid: pid}, nil
}

// Append writes e and fsyncs it.
func (l *Ledger) Append(e Entry) error {
	e.PID = l.pid
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return l.f.Sync()
}

// Found is what the downstream knows of a charge under an idempotency key.
type Found struct {
	// Effect is the charge's effect ID, when Landed.
	Effect string
	// Landed: a charge was made under the key.
	Landed bool
	// InFlight: no charge yet, but a request under the key is still being
	// worked on by a live process — it may yet land.
	InFlight bool
}

// Lookup reads every ledger file in dir for a charge made under the
// idempotency key ikey, as a downstream answers "what happened to
// Idempotency-Key K?". A request sent under the key and not answered by a
// process that is still alive is in flight: a killed worker's request is
// dead with it.
func Lookup(dir, ikey string) (Found, error) {
	entries, _, err := MergeLedgers(dir)
	if err != nil {
		return Found{}, err
	}
	open := map[string]int{} // request (pid/effect) -> pid, sent and not answered
	for _, e := range entries {
		if e.IKey != ikey {
			continue
		}
		switch e.Kind {
		case KindCharge:
			return Found{Effect: e.Effect, Landed: true}, nil
		case KindSent:
			open[e.Effect] = e.PID
		case KindAnswered:
			delete(open, e.Effect)
		}
	}
	for _, pid := range open {
		if alive(pid) {
			return Found{InFlight: true}, nil
		}
	}
	return Found{}, nil
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// Close closes the file.
func (l *Ledger) Close() error { return l.f.Close() }

// MergeLedgers reads every ledger file in dir. Lines that do not decode (a
// line cut short by a SIGKILL) are counted, not returned.
func MergeLedgers(dir string) (entries []Entry, torn int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "ledger-*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	sort.Strings(files)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, 0, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e Entry
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				torn++
				continue
			}
			entries = append(entries, e)
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return nil, 0, err
		}
	}
	return entries, torn, nil
}

package faultrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/tesserix/idempotency/store"
)

// CallEvent is one store call a worker process noted: every takeover (a
// claim superseding a lapsed holder's token) and every call that failed.
// They say which recovery paths a round reached — a takeover whose answer
// never came is the one the network nemesis is for — and, for a key with
// two effects, which store calls led there.
type CallEvent struct {
	At  time.Time `json:"at"`
	PID int       `json:"pid"`
	Op  string    `json:"op"`
	// Activity is the claiming activity's type (claims and takeovers).
	Activity  string `json:"activity,omitempty"`
	Key       string `json:"key"`
	Token     int64  `json:"token,omitempty"`
	Supersede int64  `json:"supersede,omitempty"`
	Attempt   int32  `json:"attempt,omitempty"`
	// Status is the claim's answer (acquired, held, …) when it answered.
	Status string `json:"status,omitempty"`
	// CtxEnded says the caller's context had ended when the call returned.
	CtxEnded bool   `json:"ctx_ended,omitempty"`
	Err      string `json:"err,omitempty"`
}

// String is the event in one line: when, which process, what, and how it
// ended.
func (e CallEvent) String() string {
	out := fmt.Sprintf("%s pid %d %s", e.At.Format("15:04:05.000"), e.PID, e.Op)
	if e.Activity != "" {
		out += " " + e.Activity
	}
	if e.Attempt != 0 {
		out += fmt.Sprintf(" attempt %d", e.Attempt)
	}
	if e.Supersede != 0 {
		out += fmt.Sprintf(" superseding %d", e.Supersede)
	}
	if e.Status != "" {
		out += fmt.Sprintf(": %s token %d", e.Status, e.Token)
	} else if e.Token != 0 {
		out += fmt.Sprintf(" token %d", e.Token)
	}
	if e.Err != "" {
		out += ": " + e.Err
	}
	if e.CtxEnded {
		out += " (context ended)"
	}
	return out
}

// Store call operations as CallEvent.Op names them.
const (
	OpTakeover = "takeover"
	OpClaim    = "claim"
	OpRenew    = "renew"
	OpComplete = "complete"
	OpRelease  = "release"
	OpMark     = "mark_indeterminate"
	OpWait     = "wait"
	OpLookup   = "lookup"
)

// callLog appends CallEvents to this process's file in the ledger
// directory. Lines are written unbuffered (a SIGKILL loses none written)
// but not fsynced: they are evidence, not the ledger.
type callLog struct {
	mu  sync.Mutex
	f   *os.File
	pid int
}

func openCallLog(dir string) (*callLog, error) {
	pid := os.Getpid()
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("calls-%d.jsonl", pid)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &callLog{f: f, pid: pid}, nil
}

func (l *callLog) note(e CallEvent) {
	e.At, e.PID = time.Now(), l.pid
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(b, '\n'))
}

func (l *callLog) Close() error { return l.f.Close() }

// watchedStore is the worker's store with its takeovers and failed calls
// noted in a callLog; it changes nothing of what the store does or answers.
type watchedStore struct {
	store.Store
	log *callLog
}

// watchedTxStore is a watchedStore over a store that runs transactional
// bodies: its transactions are the store's own.
type watchedTxStore struct {
	watchedStore
	store.Transactor
}

var statusNames = map[store.Status]string{
	store.StatusAcquired: "acquired", store.StatusCompleted: "completed",
	store.StatusIndeterminate: "indeterminate", store.StatusHeld: "held", store.StatusFree: "free",
}

func (s watchedStore) noteErr(ctx context.Context, op, key string, token int64, err error) {
	if err != nil {
		s.log.note(CallEvent{Op: op, Key: key, Token: token, CtxEnded: ctx.Err() != nil, Err: err.Error()})
	}
}

func (s watchedStore) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	res, err := s.Store.Claim(ctx, p)
	if p.Supersede != 0 || err != nil {
		op := OpClaim
		if p.Supersede != 0 {
			op = OpTakeover
		}
		e := CallEvent{Op: op, Activity: p.Origin.ActivityType, Key: p.Key, Supersede: p.Supersede,
			Attempt: p.Origin.Attempt, CtxEnded: ctx.Err() != nil}
		if err != nil {
			e.Err = err.Error()
		} else {
			e.Status, e.Token = statusNames[res.Status], res.Record.Token
		}
		s.log.note(e)
	}
	return res, err
}

func (s watchedStore) Renew(ctx context.Context, p store.RenewParams) (time.Time, error) {
	t, err := s.Store.Renew(ctx, p)
	s.noteErr(ctx, OpRenew, p.Key, p.Token, err)
	return t, err
}

func (s watchedStore) Complete(ctx context.Context, p store.CompleteParams) error {
	err := s.Store.Complete(ctx, p)
	s.noteErr(ctx, OpComplete, p.Key, p.Token, err)
	return err
}

func (s watchedStore) Release(ctx context.Context, p store.ReleaseParams) error {
	err := s.Store.Release(ctx, p)
	s.noteErr(ctx, OpRelease, p.Key, p.Token, err)
	return err
}

func (s watchedStore) MarkIndeterminate(ctx context.Context, p store.MarkIndeterminateParams) error {
	err := s.Store.MarkIndeterminate(ctx, p)
	s.noteErr(ctx, OpMark, p.Key, p.Token, err)
	return err
}

func (s watchedStore) Wait(ctx context.Context, p store.WaitParams) (store.Result, error) {
	res, err := s.Store.Wait(ctx, p)
	// A wait that ends with its own context (the heartbeat slice) is how
	// waiting works, not a failure.
	if err != nil && ctx.Err() == nil {
		s.noteErr(ctx, OpWait, p.Key, p.Token, err)
	}
	return res, err
}

func (s watchedStore) Lookup(ctx context.Context, p store.LookupParams) (store.Record, error) {
	rec, err := s.Store.Lookup(ctx, p)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.noteErr(ctx, OpLookup, p.Key, 0, err)
	}
	return rec, err
}

// ReadCallEvents reads every worker's call events in dir, in time order.
// Lines that do not decode (cut short by a SIGKILL) are skipped.
func ReadCallEvents(dir string) ([]CallEvent, error) {
	files, err := filepath.Glob(filepath.Join(dir, "calls-*.jsonl"))
	if err != nil {
		return nil, err
	}
	var events []CallEvent
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e CallEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				events = append(events, e)
			}
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].At.Before(events[j].At) })
	return events, nil
}

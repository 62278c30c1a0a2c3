// Package compat holds what the compatibility fixtures of the library share:
// finding the frozen sets, writing a new one, and writing and checking the
// records every store keeps.
//
// # Why
//
// While workers roll from one release to the next (or run side by side under
// Worker Versioning), old and new code read and write the same records, keys
// and payloads. Each release freezes what it writes, as a fixture set under
// the testdata/compat directory of the package that reads it, and every
// later release's tests load every set and check that the current code reads
// it exactly. A change of key encoding, record layout or payload shape then
// fails a test instead of slipping into a rollout.
//
// # Sets
//
// A set is a directory named "r<N>-<commit>", N the release's number (sets
// are ordered by it, numerically) and commit the abbreviated commit whose
// library code wrote it. A set is never rewritten: a release that changes a
// format adds a set of its own, with one command:
//
//	make compat-fixtures SET=r2-<commit>
//
// which runs the packages' TestCompatWrite tests with [WriteEnv] set. The
// newest set is also compared with what the current code writes, so a format
// change cannot pass without a new set; older sets are only read.
//
// The package is for tests; it makes no promise to users.
package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// WriteEnv names the variable that makes the TestCompatWrite tests write a
// new fixture set, named by its value (such as "r2-1a2b3c4"). Unset, they
// are skipped.
const WriteEnv = "IDEMPOTENCY_WRITE_COMPAT"

// Dir is the directory, relative to a package, that holds its sets.
const Dir = "testdata/compat"

var setName = regexp.MustCompile(`^r([0-9]+)-([0-9a-f]{7,40})$`)

// Set is one frozen fixture set of a package.
type Set struct {
	// Name is the directory's name, such as "r1-7a320c4".
	Name string
	// Release is the number after "r".
	Release int
	// Commit is the commit whose library code wrote the set.
	Commit string
	// Path is the set's directory.
	Path string
}

// File returns the path of the set's file name.
func (s Set) File(name string) string { return filepath.Join(s.Path, name) }

// Read returns the content of the set's file name.
func (s Set) Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(s.File(name))
	if err != nil {
		t.Fatalf("compat: set %s: %v", s.Name, err)
	}
	return b
}

// ReadJSON decodes the set's file name into v, refusing unknown fields.
func (s Set) ReadJSON(t testing.TB, name string, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(s.Read(t, name)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("compat: set %s: %s: %v", s.Name, name, err)
	}
}

func parseSet(dir, name string) (Set, bool) {
	m := setName.FindStringSubmatch(name)
	if m == nil {
		return Set{}, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return Set{}, false
	}
	return Set{Name: name, Release: n, Commit: m[2], Path: filepath.Join(dir, name)}, true
}

// Sets returns the package's sets, oldest first. A directory under [Dir]
// whose name is not a set's fails the test, and so does a package without
// any set: a reader that reads nothing must not pass.
func Sets(t testing.TB) []Set {
	t.Helper()
	entries, err := os.ReadDir(Dir)
	if err != nil {
		t.Fatalf("compat: %v", err)
	}
	var sets []Set
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		s, ok := parseSet(Dir, e.Name())
		if !ok {
			t.Fatalf("compat: %s/%s is not named as a set is (r<N>-<commit>)", Dir, e.Name())
		}
		sets = append(sets, s)
	}
	if len(sets) == 0 {
		t.Fatalf("compat: no fixture set under %s", Dir)
	}
	slices.SortFunc(sets, func(a, b Set) int { return a.Release - b.Release })
	for i := 1; i < len(sets); i++ {
		if sets[i].Release == sets[i-1].Release {
			t.Fatalf("compat: sets %s and %s have the same release number", sets[i-1].Name, sets[i].Name)
		}
	}
	return sets
}

// Newest returns the last of sets.
func Newest(sets []Set) Set { return sets[len(sets)-1] }

// ToWrite returns the set to write, named by [WriteEnv], and skips the test
// when it is unset. The name must be a set's, its release number greater
// than every existing set's, and its directory must not exist: a frozen set
// is never rewritten. The directory is created.
func ToWrite(t testing.TB) Set {
	t.Helper()
	name := os.Getenv(WriteEnv)
	if name == "" {
		t.Skipf("writes a fixture set only with %s=r<N>-<commit>", WriteEnv)
	}
	s, ok := parseSet(Dir, name)
	if !ok {
		t.Fatalf("compat: %s=%q: want r<N>-<commit>, such as r2-1a2b3c4", WriteEnv, name)
	}
	if _, err := os.Stat(s.Path); err == nil {
		t.Fatalf("compat: %s exists: a frozen set is never rewritten (remove it only when no commit holds it, after a failed run)", s.Path)
	}
	if entries, err := os.ReadDir(Dir); err == nil {
		for _, e := range entries {
			if old, ok := parseSet(Dir, e.Name()); ok && old.Release >= s.Release {
				t.Fatalf("compat: set %s would not sort after the existing %s", s.Name, old.Name)
			}
		}
	}
	if err := os.MkdirAll(s.Path, 0o755); err != nil {
		t.Fatalf("compat: %v", err)
	}
	return s
}

// Write writes b to the set's file name.
func (s Set) Write(t testing.TB, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(s.File(name), b, 0o644); err != nil {
		t.Fatalf("compat: %v", err)
	}
}

// WriteJSON writes v, indented, to the set's file name.
func (s Set) WriteJSON(t testing.TB, name string, v any) {
	t.Helper()
	s.Write(t, name, MarshalIndent(t, v))
}

// WriteREADME writes the set's README.md: what the set is (what, in the
// package's words), which commit wrote it and how.
func (s Set) WriteREADME(t testing.TB, pkg, what string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# Compatibility fixtures %s (%s)\n\n", s.Name, pkg)
	fmt.Fprintf(&b, "Release %d of the frozen fixtures: %s\n\n", s.Release, strings.TrimSpace(what))
	fmt.Fprintf(&b, "Written by the library code of commit %s, with\n\n", s.Commit)
	fmt.Fprintf(&b, "    %s=%s go test -count=1 -run '^TestCompatWrite$' ./%s/\n\n", WriteEnv, s.Name, pkg)
	b.WriteString("(`make compat-fixtures SET=" + s.Name + "` runs it for every package). Do not edit or\n" +
		"regenerate it: later code must keep reading it, and TestCompatRead checks that it\n" +
		"does on every `make test`. A release that changes a format adds a set of its own.\n")
	s.Write(t, "README.md", []byte(b.String()))
}

// MarshalIndent is json.MarshalIndent with two spaces and a final newline,
// HTML left unescaped and every character outside ASCII escaped (\u00fc), so
// that an editor that normalises Unicode cannot change a fixture's bytes.
func MarshalIndent(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatalf("compat: %v", err)
	}
	return ASCII(buf.Bytes())
}

// ASCII escapes every character of the JSON text b outside ASCII as \uXXXX
// (a surrogate pair beyond the Basic Multilingual Plane). Such characters
// stand only inside strings, where the escape means the same.
func ASCII(b []byte) []byte {
	var out bytes.Buffer
	for _, r := range string(b) {
		switch {
		case r < utf8.RuneSelf:
			out.WriteByte(byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&out, "\\u%04x", r)
		}
	}
	return out.Bytes()
}

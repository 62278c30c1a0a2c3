package redisstore

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The specification's Redis scripts (spec/redis/*.lua, see spec/SPEC.md):
// the exact text of every script the store runs, as files another
// implementation loads, and spec/vectors/lua.json with their SHA-1 (the
// EVALSHA name, the same in every language that loads the same bytes),
// the ARGV names in order and the KEYS they touch. The test compares the
// files byte for byte with the scripts the code builds (scripts.go, with
// its generated ARGV header), so a change to a script fails until the
// files are written again:
//
//	go test ./redisstore/ -run SpecLua -update
var updateSpec = flag.Bool("update", false, "write the specification's vectors (spec/redis, spec/vectors) instead of checking them")

// specScripts are the scripts by the file name they are kept under.
var specScripts = []struct {
	name   string
	script *redis.Script
	use    string
}{
	{"claim", claimScript, "a claim that must read the record first: a takeover (Supersede), an expired record still in Redis, a record of the previous layout"},
	{"renew", renewScript, "Renew: extend the holder's lease (fenced by token)"},
	{"complete", completeScript, "Complete: record the outcome (fenced by token)"},
	{"release", releaseScript, "Release: delete the holder's record (fenced by token)"},
	{"undo-claim", undoClaimScript, "undo a claim whose answer was lost (fenced by token)"},
	{"mark-indeterminate", markScript, "MarkIndeterminate (fenced by token)"},
	{"resolve", resolveScript, "Resolve: a person's decision on an indeterminate (or stale pending) record"},
	{"forget", forgetScript, "Forget: erase records of a tenant"},
	{"sweep", sweepScript, "Sweep: delete expired records"},
	{"wait-read", waitReadScript, "Wait: register a waiter on the record (w) and read it"},
	{"migrate", migrateScript, "convert a record of the previous layout (a hash) to the packed layout"},
	{"fold-index", foldIndexScript, "fold the previous layout's index set into the age index"},
}

// scriptSource returns the text a go-redis Script was made of (the field
// is not exported; its SHA-1 is checked against Hash below).
func scriptSource(t *testing.T, s *redis.Script) string {
	t.Helper()
	f := reflect.ValueOf(s).Elem().FieldByName("src")
	require.True(t, f.IsValid() && f.Kind() == reflect.String, "go-redis's Script keeps its text in src")
	return f.String()
}

type luaVector struct {
	Name string   `json:"name"`
	File string   `json:"file"`
	SHA1 string   `json:"sha1"`
	Use  string   `json:"use"`
	Keys int      `json:"keys"`
	Argv []string `json:"argv"`
}

var (
	argvLocal = regexp.MustCompile(`(?m)^local ([a-z_0-9]+) = ARGV\[([0-9]+)\]$`)
	keysRef   = regexp.MustCompile(`KEYS\[([0-9]+)\]`)
)

func TestSpecLua(t *testing.T) {
	const dir = "../spec/redis"
	var vectors []luaVector
	for _, s := range specScripts {
		src := scriptSource(t, s.script)
		sum := sha1.Sum([]byte(src))
		require.Equal(t, s.script.Hash(), hex.EncodeToString(sum[:]), s.name)
		v := luaVector{Name: s.name, File: "spec/redis/" + s.name + ".lua", SHA1: s.script.Hash(), Use: s.use, Argv: []string{}}
		for _, m := range argvLocal.FindAllStringSubmatch(src, -1) {
			n, _ := strconv.Atoi(m[2])
			require.Equal(t, len(v.Argv)+1, n, "%s: ARGV locals in order", s.name)
			v.Argv = append(v.Argv, m[1])
		}
		for _, m := range keysRef.FindAllStringSubmatch(src, -1) {
			n, _ := strconv.Atoi(m[1])
			v.Keys = max(v.Keys, n)
		}
		vectors = append(vectors, v)
		path := filepath.Join(dir, s.name+".lua")
		if *updateSpec {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "run with -update to write it")
		require.Equal(t, src, string(got), "%s differs from the script the code runs", path)
	}
	if !*updateSpec {
		// No file is left over from a script that is gone.
		files, err := filepath.Glob(filepath.Join(dir, "*.lua"))
		require.NoError(t, err)
		var want []string
		for _, s := range specScripts {
			want = append(want, filepath.Join(dir, s.name+".lua"))
		}
		slices.Sort(want)
		require.Equal(t, want, files)
	}

	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(struct {
		Version     int         `json:"version"`
		GeneratedBy string      `json:"generated_by"`
		Vectors     []luaVector `json:"vectors"`
	}{1, "redisstore.TestSpecLua", vectors}))
	path := "../spec/vectors/lua.json"
	if *updateSpec {
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		return
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to write it")
	require.Equal(t, b.String(), string(got), "%s differs from the scripts the code runs", path)
}

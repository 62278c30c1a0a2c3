package compat

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, older, newer string
		want               string // empty: covered
	}{
		{"equal", `{"a":1,"b":[1,{"c":"x"}]}`, `{"b":[1,{"c":"x"}],"a":1}`, ""},
		{"a member added", `{"a":1}`, `{"a":1,"b":2}`, ""},
		{"a member added deep", `{"a":{"b":1}}`, `{"a":{"b":1,"c":null}}`, ""},
		{"a member gone", `{"a":1,"b":2}`, `{"a":1}`, `/b: member missing (was 2)`},
		{"a value changed", `{"a":{"b":"x"}}`, `{"a":{"b":"y"}}`, `/a/b: "x" became "y"`},
		{"a type changed", `{"a":1}`, `{"a":"1"}`, `/a: 1 became "1"`},
		{"numbers compared exactly", `{"t":6166759917972120761}`, `{"t":6166759917972120762}`, `/t: 6166759917972120761 became 6166759917972120762`},
		{"an object became a list", `{"a":{}}`, `{"a":[]}`, `/a: an object became []`},
		{"a list grew", `[1]`, `[1,2]`, `(the value): a list of 1 became one of 2`},
		{"an element changed", `[{"a":1}]`, `[{"a":2}]`, `/0/a: 1 became 2`},
		{"names escaped in pointers", `{"a/b~":1}`, `{}`, `/a~1b~0: member missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Covers([]byte(tt.older), []byte(tt.newer))
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	assert.NoError(t, Equal([]byte(`{"a":[1,2]}`), []byte(` { "a" : [ 1 , 2 ] } `)))
	assert.Error(t, Equal([]byte(`{"a":1}`), []byte(`{"a":1,"b":2}`)), "Equal holds both ways")
	assert.Error(t, Covers([]byte(`{`), []byte(`{}`)))
}

func TestMarshalIndentEscapesOutsideASCII(t *testing.T) {
	t.Parallel()
	in := map[string]string{"tenant": "zürich-ä", "name": "Zoe\u0308 🛫", "html": "<a&b>"}
	b := MarshalIndent(t, in)
	for _, c := range b {
		require.Less(t, c, byte(0x80), "only ASCII: %s", b)
	}
	assert.Contains(t, string(b), `"z\u00fcrich-\u00e4"`)
	assert.Contains(t, string(b), `"Zoe\u0308 \ud83d\udeeb"`)
	assert.Contains(t, string(b), `"<a&b>"`, "HTML left as it is")
	var out map[string]string
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out, "the same text, byte for byte, once decoded")
}

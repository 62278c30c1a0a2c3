package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Covers reports, as an error naming the first difference by its JSON
// Pointer, whether the JSON text newer holds everything the JSON text older
// holds: every member of every object of older is in newer, with a value
// that covers older's; lists are as long and covered element by element;
// other values are equal. newer may have members older lacks: a reader of
// older (encoding/json, which ignores unknown members) reads newer as it read
// older.
func Covers(older, newer []byte) error {
	o, err := decode(older)
	if err != nil {
		return fmt.Errorf("older: %w", err)
	}
	n, err := decode(newer)
	if err != nil {
		return fmt.Errorf("newer: %w", err)
	}
	return covers("", o, n)
}

// Equal reports, as an error naming the first difference, whether the JSON
// texts a and b hold the same value (member order and spacing aside).
func Equal(a, b []byte) error {
	if err := Covers(a, b); err != nil {
		return err
	}
	if err := Covers(b, a); err != nil {
		return fmt.Errorf("the other way: %w", err)
	}
	return nil
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func covers(path string, o, n any) error {
	switch ov := o.(type) {
	case map[string]any:
		nv, ok := n.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: an object became %s", pointer(path), describe(n))
		}
		names := make([]string, 0, len(ov))
		for k := range ov {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			p := path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			nm, ok := nv[k]
			if !ok {
				return fmt.Errorf("%s: member missing (was %s)", pointer(p), describe(ov[k]))
			}
			if err := covers(p, ov[k], nm); err != nil {
				return err
			}
		}
		return nil
	case []any:
		nv, ok := n.([]any)
		if !ok {
			return fmt.Errorf("%s: a list became %s", pointer(path), describe(n))
		}
		if len(nv) != len(ov) {
			return fmt.Errorf("%s: a list of %d became one of %d", pointer(path), len(ov), len(nv))
		}
		for i := range ov {
			if err := covers(fmt.Sprintf("%s/%d", path, i), ov[i], nv[i]); err != nil {
				return err
			}
		}
		return nil
	default:
		if !reflect.DeepEqual(o, n) {
			return fmt.Errorf("%s: %s became %s", pointer(path), describe(o), describe(n))
		}
		return nil
	}
}

func pointer(path string) string {
	if path == "" {
		return "(the value)"
	}
	return path
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

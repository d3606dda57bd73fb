package connect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// jnode is a parsed JSON value, object members in their order (a repeated
// member keeps its first place and takes its last value, as Jackson's
// ObjectNode).
type jnode struct {
	kind   jkind
	str    string  // jString; a number's literal
	num    float64 // jDouble
	ival   int64   // jInt, jLong
	b      bool
	keys   []string
	vals   []*jnode // object values, array elements
	bigint bool     // an integer literal beyond int64
}

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jString
	jInt    // fits int32 (Jackson's IntNode)
	jLong   // fits int64 (LongNode)
	jBig    // beyond int64 (BigIntegerNode)
	jDouble // a literal with a fraction or exponent (DoubleNode)
	jArray
	jObject
)

func (n *jnode) isNumber() bool { return n.kind >= jInt && n.kind <= jDouble }

// parseJSON reads the first JSON value of b, as Jackson's readTree (the
// rest of b is not read).
func parseJSON(b []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return readNode(dec)
}

func readNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	return nodeOf(dec, tok)
}

func nodeOf(dec *json.Decoder, tok json.Token) (*jnode, error) {
	switch t := tok.(type) {
	case nil:
		return &jnode{kind: jNull}, nil
	case bool:
		return &jnode{kind: jBool, b: t}, nil
	case string:
		return &jnode{kind: jString, str: t}, nil
	case json.Number:
		return numberNode(string(t))
	case json.Delim:
		switch t {
		case '[':
			n := &jnode{kind: jArray}
			for dec.More() {
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, v)
			}
			_, err := dec.Token()
			return n, err
		case '{':
			n := &jnode{kind: jObject}
			at := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				if i, ok := at[k]; ok {
					n.vals[i] = v
					continue
				}
				at[k] = len(n.keys)
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
			_, err := dec.Token()
			return n, err
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// numberNode classifies a number literal as Jackson does: an integer
// literal is an int, a long or a big integer by its size; anything with
// a fraction or an exponent is a double.
func numberNode(lit string) (*jnode, error) {
	if !strings.ContainsAny(lit, ".eE") {
		i, err := strconv.ParseInt(lit, 10, 64)
		if err != nil {
			if _, ok := new(big.Int).SetString(lit, 10); !ok {
				return nil, fmt.Errorf("number %q", lit)
			}
			return &jnode{kind: jBig, str: lit}, nil
		}
		if i >= math.MinInt32 && i <= math.MaxInt32 {
			return &jnode{kind: jInt, ival: i}, nil
		}
		return &jnode{kind: jLong, ival: i}, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, err
	}
	return &jnode{kind: jDouble, num: f, str: lit}, nil
}

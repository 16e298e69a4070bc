package rabbitmq

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP header values are typed (an x-death count is a long, a time a
// timestamp, a table nests). The payload envelope keeps each type, so a
// replay publishes the headers it read, not their JSON look-alikes:
// strings, booleans and void are plain JSON; every other value is an
// object with one key naming its AMQP type, {"int64": 3},
// {"timestamp": "2026-01-02T03:04:05Z"}, {"table": {...}}.

func encodeTable(t amqp.Table) (map[string]any, error) {
	if t == nil {
		return nil, nil
	}
	out := make(map[string]any, len(t))
	for k, v := range t {
		ev, err := encodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		out[k] = ev
	}
	return out, nil
}

func encodeValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool:
		return x, nil
	case int8:
		return map[string]any{"int8": x}, nil
	case uint8:
		return map[string]any{"uint8": x}, nil
	case int16:
		return map[string]any{"int16": x}, nil
	case uint16:
		return map[string]any{"uint16": x}, nil
	case int32:
		return map[string]any{"int32": x}, nil
	case uint32:
		return map[string]any{"uint32": x}, nil
	case int:
		return map[string]any{"int64": int64(x)}, nil
	case int64:
		return map[string]any{"int64": x}, nil
	case float32:
		return map[string]any{"float32": x}, nil
	case float64:
		return map[string]any{"float64": x}, nil
	case []byte:
		return map[string]any{"bytes": base64.StdEncoding.EncodeToString(x)}, nil
	case time.Time:
		return map[string]any{"timestamp": x.UTC().Format(time.RFC3339)}, nil
	case amqp.Decimal:
		return map[string]any{"decimal": map[string]any{"scale": x.Scale, "value": x.Value}}, nil
	case amqp.Table:
		t, err := encodeTable(x)
		return map[string]any{"table": t}, err
	case []any:
		arr := make([]any, len(x))
		for i, e := range x {
			ev, err := encodeValue(e)
			if err != nil {
				return nil, err
			}
			arr[i] = ev
		}
		return map[string]any{"array": arr}, nil
	}
	return nil, fmt.Errorf("unsupported AMQP value of type %T", v)
}

func decodeTable(m map[string]json.RawMessage) (amqp.Table, error) {
	if m == nil {
		return nil, nil
	}
	t := make(amqp.Table, len(m))
	for k, raw := range m {
		v, err := decodeValue(raw)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		t[k] = v
	}
	return t, nil
}

func decodeValue(raw json.RawMessage) (any, error) {
	var plain any
	if err := json.Unmarshal(raw, &plain); err != nil {
		return nil, err
	}
	switch plain.(type) {
	case nil, string, bool:
		return plain, nil
	}
	var tagged map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tagged); err != nil || len(tagged) != 1 {
		return nil, fmt.Errorf("want a string, boolean, null or a one-key typed object, got %s", raw)
	}
	for typ, v := range tagged {
		return decodeTyped(typ, v)
	}
	return nil, nil
}

func decodeTyped(typ string, v json.RawMessage) (any, error) {
	num := func(lo, hi float64) (float64, error) {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return 0, err
		}
		if f < lo || f > hi || f != math.Trunc(f) {
			return 0, fmt.Errorf("%s %v out of range", typ, f)
		}
		return f, nil
	}
	switch typ {
	case "int8":
		f, err := num(math.MinInt8, math.MaxInt8)
		return int8(f), err
	case "uint8":
		f, err := num(0, math.MaxUint8)
		return uint8(f), err
	case "int16":
		f, err := num(math.MinInt16, math.MaxInt16)
		return int16(f), err
	case "uint16":
		f, err := num(0, math.MaxUint16)
		return uint16(f), err
	case "int32":
		f, err := num(math.MinInt32, math.MaxInt32)
		return int32(f), err
	case "uint32":
		f, err := num(0, math.MaxUint32)
		return uint32(f), err
	case "int64":
		var n int64
		err := json.Unmarshal(v, &n)
		return n, err
	case "float32":
		var f float32
		err := json.Unmarshal(v, &f)
		return f, err
	case "float64":
		var f float64
		err := json.Unmarshal(v, &f)
		return f, err
	case "bytes":
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		return base64.StdEncoding.DecodeString(s)
	case "timestamp":
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		return time.Parse(time.RFC3339, s)
	case "decimal":
		var d struct {
			Scale uint8 `json:"scale"`
			Value int32 `json:"value"`
		}
		err := json.Unmarshal(v, &d)
		return amqp.Decimal{Scale: d.Scale, Value: d.Value}, err
	case "table":
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, err
		}
		t, err := decodeTable(m)
		if t == nil && err == nil {
			t = amqp.Table{}
		}
		return t, err
	case "array":
		var arr []json.RawMessage
		if err := json.Unmarshal(v, &arr); err != nil {
			return nil, err
		}
		out := make([]any, len(arr))
		for i, e := range arr {
			x, err := decodeValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown AMQP type %q", typ)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

package otlp

import (
	"context"
	"encoding"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// textValues hands the OpenTelemetry bridge the text that slog's own
// handlers write for a value (its encoding.TextMarshaler, else its
// fmt.Stringer), and a slice of such values as a slice of those texts.
// The bridge would export their Go representation instead: a multiaddr as
// its raw bytes, a peer ID as "unhandled: (peer.ID) ...", a public key as
// 32 numbers. Errors are left to the bridge, which exports their message.
type textValues struct{ slog.Handler }

func (h textValues) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(textAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h textValues) WithAttrs(attrs []slog.Attr) slog.Handler {
	return textValues{h.Handler.WithAttrs(textAttrs(attrs))}
}

func (h textValues) WithGroup(name string) slog.Handler {
	return textValues{h.Handler.WithGroup(name)}
}

func textAttrs(attrs []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = textAttr(a)
	}
	return out
}

func textAttr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindAny:
		a.Value = textValue(a.Value.Any(), a.Value)
	case slog.KindGroup:
		a.Value = slog.GroupValue(textAttrs(a.Value.Group())...)
	}
	return a
}

var (
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	stringerType      = reflect.TypeFor[fmt.Stringer]()
)

// textValue is x's text form, or a slice of its elements' when they have
// one; otherwise v unchanged.
func textValue(x any, v slog.Value) slog.Value {
	if _, ok := x.(error); ok {
		return v
	}
	if s, ok := text(x); ok {
		return slog.StringValue(s)
	}
	rv := reflect.ValueOf(x)
	if k := rv.Kind(); k != reflect.Slice && k != reflect.Array {
		return v
	}
	if e := rv.Type().Elem(); e.Kind() == reflect.Interface || !e.Implements(textMarshalerType) && !e.Implements(stringerType) {
		return v
	}
	texts := make([]string, rv.Len())
	for i := range texts {
		e := rv.Index(i).Interface()
		s, ok := text(e)
		if !ok {
			s = fmt.Sprintf("%+v", e) // fmt says "<nil>" for a nil pointer
		}
		texts[i] = s
	}
	return slog.AnyValue(texts)
}

// text is x's MarshalText, else its String, if it has either.
func text(x any) (s string, ok bool) {
	defer func() {
		if recover() != nil { // a method on a nil pointer
			s, ok = "", false
		}
	}()
	if m, isM := x.(encoding.TextMarshaler); isM {
		if b, err := m.MarshalText(); err == nil {
			return string(b), true
		}
	}
	if st, isS := x.(fmt.Stringer); isS {
		return st.String(), true
	}
	return "", false
}

// validRecords returns records with every string in their bodies and
// attributes (keys and values, nested ones included) valid UTF-8, as OTLP's
// protobuf encoding requires: a single invalid string fails the whole
// batch. The records that need it are cloned and fixed (the Exporter
// contract forbids changing the caller's); the others are shared.
func validRecords(records []sdklog.Record) []sdklog.Record {
	out, cloned := records, false
	var kvs []attribute.KeyValue
	for i := range records {
		r := &records[i]
		body, bodyFixed := validValue(r.Body())
		kvs = kvs[:0]
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			kvs = append(kvs, kv)
			return true
		})
		fixedKVs, attrsFixed := validKeyValues(kvs)
		if !bodyFixed && !attrsFixed {
			continue
		}
		if !cloned {
			out, cloned = slices.Clone(records), true
		}
		c := r.Clone()
		if bodyFixed {
			c.SetBody(body)
		}
		if attrsFixed {
			c.SetAttributes(fixedKVs...)
		}
		out[i] = c
	}
	return out
}

// validValue returns v with every string in it valid UTF-8, and whether
// that changed it.
func validValue(v attribute.Value) (attribute.Value, bool) {
	switch v.Type() {
	case attribute.STRING:
		if s := v.AsString(); !utf8.ValidString(s) {
			return attribute.StringValue(validUTF8(s)), true
		}
	case attribute.STRINGSLICE:
		ss := v.AsStringSlice()
		if slices.ContainsFunc(ss, func(s string) bool { return !utf8.ValidString(s) }) {
			fixed := make([]string, len(ss))
			for i, s := range ss {
				fixed[i] = validUTF8(s)
			}
			return attribute.StringSliceValue(fixed), true
		}
	case attribute.SLICE:
		vs := v.AsSlice()
		var fixed []attribute.Value
		for i, e := range vs {
			if f, changed := validValue(e); changed {
				if fixed == nil {
					fixed = slices.Clone(vs)
				}
				fixed[i] = f
			}
		}
		if fixed != nil {
			return attribute.SliceValue(fixed...), true
		}
	case attribute.MAP:
		if kvs, changed := validKeyValues(v.AsMap()); changed {
			return attribute.MapValue(kvs...), true
		}
	}
	return v, false
}

// validKeyValues is validValue for a list of attributes: a copy when one
// changed.
func validKeyValues(kvs []attribute.KeyValue) ([]attribute.KeyValue, bool) {
	var fixed []attribute.KeyValue
	for i, kv := range kvs {
		v, changed := validValue(kv.Value)
		if k := string(kv.Key); changed || !utf8.ValidString(k) {
			if fixed == nil {
				fixed = slices.Clone(kvs)
			}
			fixed[i] = attribute.KeyValue{Key: attribute.Key(validUTF8(k)), Value: v}
		}
	}
	return fixed, fixed != nil
}

// validUTF8 writes each byte of s that is not part of valid UTF-8 as \xNN,
// as %q would: the text stays readable and the bytes can be told.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

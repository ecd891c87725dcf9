package chat

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Values follow Python's as jinja2 sees them: nil is None, and the other
// types are bool, int64, string, []value (a list), *dict, *namespace,
// *loopState and undefined.
type value any

// undefined is jinja2's default Undefined: empty when printed, false, empty
// when iterated, and an error when used any other way.
type undefined struct{ msg string } // the UndefinedError it raises

type dict struct {
	keys []string
	m    map[string]value
}

func (d *dict) set(k string, v value) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

type namespace struct{ attrs *dict }

type loopState struct {
	items  []value
	index0 int
}

// Limits that stop a runaway template.
const (
	maxSteps  = 5_000_000
	maxOutput = 64 << 20
	maxRange  = 100_000 // jinja2's sandbox limit
)

// RaisedError is the error a template raises with raise_exception(msg).
type RaisedError struct {
	Line, Col int
	Message   string
}

func (e *RaisedError) Error() string {
	return fmt.Sprintf("chat template line %d:%d: raise_exception: %s", e.Line, e.Col, e.Message)
}

// errBreak and errContinue unwind a loop's body; the parser refuses them
// outside a loop.
var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

type renderer struct {
	src    string
	out    strings.Builder
	scopes []map[string]value
	steps  int
}

func (r *renderer) errAt(pos int, format string, args ...any) error {
	return errAt(r.src, pos, format, args...)
}

func (r *renderer) step(pos int) error {
	r.steps++
	if r.steps > maxSteps {
		return r.errAt(pos, "the template ran more than %d steps", maxSteps)
	}
	return nil
}

func (r *renderer) checkSize(pos, n int) error {
	if n > maxOutput {
		return r.errAt(pos, "the template produced more than %d bytes", maxOutput)
	}
	return nil
}

func (r *renderer) lookup(name string) (value, bool) {
	for i := len(r.scopes) - 1; i >= 0; i-- {
		if v, ok := r.scopes[i][name]; ok {
			return v, true
		}
	}
	return nil, false
}

func (r *renderer) exec(body []stmt) error {
	for _, s := range body {
		if err := r.step(s.at()); err != nil {
			return err
		}
		var err error
		switch s := s.(type) {
		case textStmt:
			err = r.write(0, s.text)
		case outputStmt:
			var v value
			if v, err = r.eval(s.x); err == nil {
				var str string
				if str, err = r.str(s.x.at(), v); err == nil {
					err = r.write(s.x.at(), str)
				}
			}
		case ifStmt:
			err = r.execIf(s)
		case forStmt:
			err = r.execFor(s)
		case setStmt:
			err = r.execSet(s)
		case loopCtlStmt:
			err = errContinue
			if s.isBrk {
				err = errBreak
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) write(pos int, s string) error {
	if err := r.checkSize(pos, r.out.Len()+len(s)); err != nil {
		return err
	}
	r.out.WriteString(s)
	return nil
}

func (r *renderer) execIf(s ifStmt) error {
	for i, c := range s.conds {
		v, err := r.eval(c)
		if err != nil {
			return err
		}
		if truthy(v) {
			return r.exec(s.bodies[i])
		}
	}
	if len(s.bodies) > len(s.conds) {
		return r.exec(s.bodies[len(s.conds)])
	}
	return nil
}

// bind sets a loop's targets to item in scope, which it clears first: each
// iteration starts afresh.
func (r *renderer) bind(s forStmt, scope map[string]value, item value) error {
	clear(scope)
	if len(s.targets) == 1 {
		scope[s.targets[0]] = item
		return nil
	}
	l, ok := item.([]value)
	if !ok || len(l) != len(s.targets) {
		return r.errAt(s.pos, "cannot unpack %s into %d loop variables", typeName(item), len(s.targets))
	}
	for i, name := range s.targets {
		scope[name] = l[i]
	}
	return nil
}

// execFor runs a loop. As in jinja2, each iteration has its own scope, so
// a set inside the body is not seen by the next iteration or after the loop.
func (r *renderer) execFor(s forStmt) error {
	it, err := r.eval(s.iter)
	if err != nil {
		return err
	}
	all, err := r.iterate(s.iter.at(), it)
	if err != nil {
		return err
	}
	items := all
	scope := map[string]value{}
	if s.cond != nil {
		items = nil
		for _, item := range all {
			if err := r.step(s.pos); err != nil {
				return err
			}
			if err := r.bind(s, scope, item); err != nil {
				return err
			}
			r.scopes = append(r.scopes, scope)
			v, err := r.eval(s.cond)
			r.scopes = r.scopes[:len(r.scopes)-1]
			if err != nil {
				return err
			}
			if truthy(v) {
				items = append(items, item)
			}
		}
	}
	if len(items) == 0 {
		return r.exec(s.elseBody)
	}
	loop := &loopState{items: items}
	for i, item := range items {
		if err := r.step(s.pos); err != nil {
			return err
		}
		if err := r.bind(s, scope, item); err != nil {
			return err
		}
		loop.index0 = i
		scope["loop"] = loop
		r.scopes = append(r.scopes, scope)
		err := r.exec(s.body)
		r.scopes = r.scopes[:len(r.scopes)-1]
		if err == errBreak {
			break
		}
		if err != nil && err != errContinue {
			return err
		}
	}
	return nil
}

func (r *renderer) execSet(s setStmt) error {
	v, err := r.eval(s.x)
	if err != nil {
		return err
	}
	if s.attr == "" {
		r.scopes[len(r.scopes)-1][s.name] = v
		return nil
	}
	target, _ := r.lookup(s.name)
	ns, ok := target.(*namespace)
	if !ok {
		return r.errAt(s.pos, "cannot assign attribute %q on %s: only a namespace() takes attributes", s.attr, typeName(target))
	}
	if strings.HasPrefix(s.attr, "_") {
		return r.errAt(s.pos, "a namespace attribute cannot start with an underscore (%q)", s.attr)
	}
	ns.attrs.set(s.attr, v)
	return nil
}

// iterate returns the items a for loop visits.
func (r *renderer) iterate(pos int, v value) ([]value, error) {
	switch v := v.(type) {
	case undefined:
		return nil, nil
	case []value:
		return v, nil
	case string:
		var items []value
		for _, c := range v {
			items = append(items, string(c))
		}
		return items, nil
	case *dict:
		items := make([]value, len(v.keys))
		for i, k := range v.keys {
			items[i] = k
		}
		return items, nil
	}
	return nil, r.errAt(pos, "%s is not iterable", typeName(v))
}

func (r *renderer) eval(e expr) (value, error) {
	if err := r.step(e.at()); err != nil {
		return nil, err
	}
	switch e := e.(type) {
	case litExpr:
		return e.v, nil
	case nameExpr:
		if v, ok := r.lookup(e.name); ok {
			return v, nil
		}
		return undefined{fmt.Sprintf("'%s' is undefined", e.name)}, nil
	case listExpr:
		items := make([]value, len(e.items))
		for i, x := range e.items {
			v, err := r.eval(x)
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		return items, nil
	case dictExpr:
		return r.evalDict(e)
	case attrExpr:
		x, err := r.eval(e.x)
		if err != nil {
			return nil, err
		}
		return r.member(e.pos, x, e.name)
	case itemExpr:
		return r.evalItem(e)
	case sliceExpr:
		return r.evalSlice(e)
	case callExpr:
		return r.evalCall(e)
	case filterExpr:
		return r.evalFilter(e)
	case testExpr:
		return r.evalTest(e)
	case binExpr:
		return r.evalBinary(e)
	case unaryExpr:
		x, err := r.eval(e.x)
		if err != nil {
			return nil, err
		}
		if e.op == "not" {
			return !truthy(x), nil
		}
		n, err := r.int(e.pos, x)
		if e.op == "-" {
			n = -n
		}
		return n, err
	case condExpr:
		c, err := r.eval(e.cond)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return r.eval(e.then)
		}
		if e.els == nil {
			return undefined{"the inline if has no else branch"}, nil
		}
		return r.eval(e.els)
	}
	return nil, r.errAt(e.at(), "internal error: unknown expression %T", e)
}

func (r *renderer) evalDict(e dictExpr) (value, error) {
	d := &dict{m: map[string]value{}}
	for i := range e.keys {
		k, err := r.eval(e.keys[i])
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			return nil, r.errAt(e.keys[i].at(), "dictionary keys must be strings, not %s", typeName(k))
		}
		v, err := r.eval(e.vals[i])
		if err != nil {
			return nil, err
		}
		d.set(ks, v)
	}
	return d, nil
}

// member is x.name (and x["name"] on what is not a dict), which is
// undefined when x has no such member, as in jinja2.
func (r *renderer) member(pos int, x value, name string) (value, error) {
	switch x := x.(type) {
	case undefined:
		return nil, r.errAt(pos, "%s", x.msg)
	case *dict:
		if v, ok := x.m[name]; ok {
			return v, nil
		}
	case *namespace:
		if v, ok := x.attrs.m[name]; ok {
			return v, nil
		}
	case *loopState:
		n := len(x.items)
		switch name {
		case "index":
			return int64(x.index0 + 1), nil
		case "index0":
			return int64(x.index0), nil
		case "revindex":
			return int64(n - x.index0), nil
		case "revindex0":
			return int64(n - x.index0 - 1), nil
		case "first":
			return x.index0 == 0, nil
		case "last":
			return x.index0 == n-1, nil
		case "length":
			return int64(n), nil
		case "previtem":
			if x.index0 > 0 {
				return x.items[x.index0-1], nil
			}
			return undefined{"there is no previous item"}, nil
		case "nextitem":
			if x.index0 < n-1 {
				return x.items[x.index0+1], nil
			}
			return undefined{"there is no next item"}, nil
		}
		return nil, r.errAt(pos, "loop.%s is not supported", name)
	}
	return undefined{fmt.Sprintf("'%s' has no attribute '%s'", typeName(x), name)}, nil
}

func (r *renderer) evalItem(e itemExpr) (value, error) {
	x, err := r.eval(e.x)
	if err != nil {
		return nil, err
	}
	k, err := r.eval(e.key)
	if err != nil {
		return nil, err
	}
	if u, ok := x.(undefined); ok {
		return nil, r.errAt(e.pos, "%s", u.msg)
	}
	missing := undefined{fmt.Sprintf("%s has no item %s", typeName(x), repr(k))}
	switch xv := x.(type) {
	case []value:
		if i, ok := index(k, len(xv)); ok {
			return xv[i], nil
		}
		return missing, nil
	case string:
		runes := []rune(xv)
		if i, ok := index(k, len(runes)); ok {
			return string(runes[i]), nil
		}
		return missing, nil
	}
	if name, ok := k.(string); ok {
		return r.member(e.pos, x, name)
	}
	return missing, nil
}

// index resolves a Python index (negative from the end) into a sequence of
// length n.
func index(k value, n int) (int, bool) {
	i, ok := k.(int64)
	if !ok {
		return 0, false
	}
	if i < 0 {
		i += int64(n)
	}
	return int(i), i >= 0 && i < int64(n)
}

func (r *renderer) evalSlice(e sliceExpr) (value, error) {
	x, err := r.eval(e.x)
	if err != nil {
		return nil, err
	}
	var bounds [3]*int64
	for i, b := range []expr{e.lo, e.hi, e.step} {
		if b == nil {
			continue
		}
		v, err := r.eval(b)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		n, err := r.int(b.at(), v)
		if err != nil {
			return nil, err
		}
		bounds[i] = &n
	}
	switch xv := x.(type) {
	case undefined:
		return nil, r.errAt(e.pos, "%s", xv.msg)
	case []value:
		idx, err := r.sliceIndices(e.pos, len(xv), bounds)
		if err != nil {
			return nil, err
		}
		out := make([]value, len(idx))
		for i, j := range idx {
			out[i] = xv[j]
		}
		return out, nil
	case string:
		runes := []rune(xv)
		idx, err := r.sliceIndices(e.pos, len(runes), bounds)
		if err != nil {
			return nil, err
		}
		out := make([]rune, len(idx))
		for i, j := range idx {
			out[i] = runes[j]
		}
		return string(out), nil
	}
	return nil, r.errAt(e.pos, "cannot slice %s", typeName(x))
}

// sliceIndices returns the indices Python's x[lo:hi:step] visits.
func (r *renderer) sliceIndices(pos, n int, b [3]*int64) ([]int, error) {
	step := int64(1)
	if b[2] != nil {
		step = *b[2]
	}
	if step == 0 {
		return nil, r.errAt(pos, "slice step cannot be zero")
	}
	clamp := func(p *int64, def, lo, hi int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += int64(n)
		}
		return min(max(v, lo), hi)
	}
	var lo, hi int64
	if step > 0 {
		lo, hi = clamp(b[0], 0, 0, int64(n)), clamp(b[1], int64(n), 0, int64(n))
	} else {
		lo, hi = clamp(b[0], int64(n)-1, -1, int64(n)-1), clamp(b[1], -1, -1, int64(n)-1)
	}
	var idx []int
	for i := lo; step > 0 && i < hi || step < 0 && i > hi; i += step {
		idx = append(idx, int(i))
	}
	return idx, nil
}

func (r *renderer) evalArgs(args []expr) ([]value, error) {
	vals := make([]value, len(args))
	for i, a := range args {
		v, err := r.eval(a)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

func (r *renderer) evalCall(e callExpr) (value, error) {
	var recv value
	if m, ok := e.fn.(attrExpr); ok {
		var err error
		if recv, err = r.eval(m.x); err != nil {
			return nil, err
		}
		if u, ok := recv.(undefined); ok {
			return nil, r.errAt(m.pos, "%s", u.msg)
		}
	}
	args, err := r.evalArgs(e.args)
	if err != nil {
		return nil, err
	}
	kwargs := &dict{m: map[string]value{}}
	for _, kw := range e.kwargs {
		v, err := r.eval(kw.x)
		if err != nil {
			return nil, err
		}
		kwargs.set(kw.name, v)
	}
	switch f := e.fn.(type) {
	case nameExpr:
		if len(e.kwargs) > 0 && f.name != "namespace" {
			return nil, r.errAt(e.pos, "%s() takes no keyword arguments", f.name)
		}
		return r.callGlobal(f, args, kwargs)
	case attrExpr:
		if len(e.kwargs) > 0 {
			return nil, r.errAt(e.pos, ".%s() takes no keyword arguments", f.name)
		}
		s, ok := recv.(string)
		if !ok {
			return nil, r.errAt(f.pos, "the method .%s() is supported on strings only, not on %s", f.name, typeName(recv))
		}
		return r.callMethod(f.pos, s, f.name, args)
	}
	return nil, r.errAt(e.pos, "internal error: bad call")
}

func (r *renderer) callGlobal(f nameExpr, args []value, kwargs *dict) (value, error) {
	if _, shadowed := r.lookup(f.name); shadowed {
		return nil, r.errAt(f.pos, "%s is not a function here: the template assigned it", f.name)
	}
	switch f.name {
	case "raise_exception":
		if len(args) != 1 {
			return nil, r.errAt(f.pos, "raise_exception() takes 1 argument, got %d", len(args))
		}
		msg, err := r.str(f.pos, args[0])
		if err != nil {
			return nil, err
		}
		line, col := lineCol(r.src, f.pos)
		return nil, &RaisedError{line, col, msg}
	case "namespace":
		ns := &namespace{&dict{m: map[string]value{}}}
		if len(args) > 1 {
			return nil, r.errAt(f.pos, "namespace() takes at most 1 positional argument")
		}
		if len(args) == 1 {
			d, ok := args[0].(*dict)
			if !ok {
				return nil, r.errAt(f.pos, "namespace() takes a dictionary, not %s", typeName(args[0]))
			}
			for _, k := range d.keys {
				ns.attrs.set(k, d.m[k])
			}
		}
		for _, k := range kwargs.keys {
			if strings.HasPrefix(k, "_") {
				return nil, r.errAt(f.pos, "a namespace attribute cannot start with an underscore (%q)", k)
			}
			ns.attrs.set(k, kwargs.m[k])
		}
		return ns, nil
	case "range":
		return r.rangeList(f.pos, args)
	}
	return nil, r.errAt(f.pos, "the function %s() is not supported", f.name)
}

func (r *renderer) rangeList(pos int, args []value) (value, error) {
	if len(args) < 1 || len(args) > 3 {
		return nil, r.errAt(pos, "range() takes 1 to 3 arguments, got %d", len(args))
	}
	var n [3]int64
	for i, a := range args {
		v, err := r.int(pos, a)
		if err != nil {
			return nil, err
		}
		n[i] = v
	}
	start, stop, step := int64(0), n[0], int64(1)
	if len(args) > 1 {
		start, stop = n[0], n[1]
	}
	if len(args) > 2 {
		step = n[2]
	}
	if step == 0 {
		return nil, r.errAt(pos, "range() step cannot be zero")
	}
	var out []value
	for i := start; step > 0 && i < stop || step < 0 && i > stop; i += step {
		if len(out) == maxRange {
			return nil, r.errAt(pos, "range() is limited to %d items", maxRange)
		}
		out = append(out, i)
	}
	return out, nil
}

func (r *renderer) callMethod(pos int, s, name string, args []value) (value, error) {
	strArgs := make([]string, len(args))
	for i, a := range args {
		if a == nil && (name == "strip" || name == "lstrip" || name == "rstrip" || name == "split") {
			continue // None means the default, whitespace
		}
		as, ok := a.(string)
		if !ok && !(name == "split" && i == 1) {
			return nil, r.errAt(pos, ".%s() takes strings, not %s", name, typeName(a))
		}
		strArgs[i] = as
	}
	nargs := func(lo, hi int) error {
		if len(args) < lo || len(args) > hi {
			return r.errAt(pos, ".%s() takes %d to %d arguments, got %d", name, lo, hi, len(args))
		}
		return nil
	}
	switch name {
	case "strip", "lstrip", "rstrip":
		if err := nargs(0, 1); err != nil {
			return nil, err
		}
		cut := isPySpace
		if len(args) == 1 && args[0] != nil {
			chars := strArgs[0]
			cut = func(c rune) bool { return strings.ContainsRune(chars, c) }
		}
		switch name {
		case "strip":
			return strings.TrimFunc(s, cut), nil
		case "lstrip":
			return strings.TrimLeftFunc(s, cut), nil
		}
		return strings.TrimRightFunc(s, cut), nil
	case "startswith", "endswith":
		if err := nargs(1, 1); err != nil {
			return nil, err
		}
		if name == "startswith" {
			return strings.HasPrefix(s, strArgs[0]), nil
		}
		return strings.HasSuffix(s, strArgs[0]), nil
	case "split":
		if err := nargs(0, 2); err != nil {
			return nil, err
		}
		limit := int64(-1)
		if len(args) == 2 {
			n, err := r.int(pos, args[1])
			if err != nil {
				return nil, err
			}
			limit = n
		}
		if len(args) == 0 || args[0] == nil {
			return toList(splitSpace(s, limit)), nil
		}
		if strArgs[0] == "" {
			return nil, r.errAt(pos, ".split() separator is empty")
		}
		n := -1
		if limit >= 0 {
			n = int(min(limit, int64(len(s)))) + 1
		}
		return toList(strings.SplitN(s, strArgs[0], n)), nil
	case "title", "upper", "lower":
		if err := nargs(0, 0); err != nil {
			return nil, err
		}
		switch name {
		case "upper":
			return strings.ToUpper(s), nil
		case "lower":
			return strings.ToLower(s), nil
		}
		return title(s), nil
	}
	return nil, r.errAt(pos, "the method .%s() is not supported", name)
}

func toList(ss []string) []value {
	out := make([]value, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// splitSpace is Python's str.split() without a separator: runs of
// whitespace separate, and at most limit splits are made (limit < 0: any).
func splitSpace(s string, limit int64) []string {
	var out []string
	for {
		s = strings.TrimLeftFunc(s, isPySpace)
		if s == "" {
			return out
		}
		if limit >= 0 && int64(len(out)) == limit {
			return append(out, strings.TrimRightFunc(s, isPySpace))
		}
		end := strings.IndexFunc(s, isPySpace)
		if end < 0 {
			return append(out, s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
}

// title is Python's str.title: a cased character after an uncased one is
// title-cased, any other is lower-cased.
func title(s string) string {
	var b strings.Builder
	prevCased := false
	for _, c := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(c))
		} else {
			b.WriteRune(unicode.ToTitle(c))
		}
		prevCased = unicode.IsUpper(c) || unicode.IsLower(c) || unicode.IsTitle(c)
	}
	return b.String()
}

func (r *renderer) evalFilter(e filterExpr) (value, error) {
	x, err := r.eval(e.x)
	if err != nil {
		return nil, err
	}
	args, err := r.evalArgs(e.args)
	if err != nil {
		return nil, err
	}
	maxArgs := map[string]int{"trim": 1, "default": 2, "d": 2}[e.name]
	if len(args) > maxArgs {
		return nil, r.errAt(e.pos, "the filter %q takes at most %d arguments", e.name, maxArgs)
	}
	switch e.name {
	case "default", "d":
		var def value = ""
		if len(args) > 0 {
			def = args[0]
		}
		_, undef := x.(undefined)
		if undef || len(args) > 1 && truthy(args[1]) && !truthy(x) {
			return def, nil
		}
		return x, nil
	case "length", "count":
		switch x := x.(type) {
		case undefined:
			return int64(0), nil
		case string:
			return int64(utf8.RuneCountInString(x)), nil
		case []value:
			return int64(len(x)), nil
		case *dict:
			return int64(len(x.keys)), nil
		}
		return nil, r.errAt(e.pos, "%s has no length", typeName(x))
	case "tojson":
		var b strings.Builder
		if err := r.toJSON(e.pos, &b, x); err != nil {
			return nil, err
		}
		return b.String(), nil
	}
	s, err := r.str(e.pos, x)
	if err != nil {
		return nil, err
	}
	switch e.name {
	case "upper":
		return strings.ToUpper(s), nil
	case "lower":
		return strings.ToLower(s), nil
	}
	// trim
	if len(args) == 1 && args[0] != nil {
		return r.callMethod(e.pos, s, "strip", args)
	}
	return strings.TrimFunc(s, isPySpace), nil
}

func (r *renderer) evalTest(e testExpr) (value, error) {
	x, err := r.eval(e.x)
	if err != nil {
		return nil, err
	}
	args, err := r.evalArgs(e.args)
	if err != nil {
		return nil, err
	}
	want := map[string]int{"divisibleby": 1, "eq": 1, "ne": 1, "in": 1}[e.name]
	if len(args) != want {
		return nil, r.errAt(e.pos, "the test %q takes %d arguments, got %d", e.name, want, len(args))
	}
	res, err := r.test(e.pos, e.name, x, args)
	if err != nil {
		return nil, err
	}
	return res != e.negate, nil
}

func (r *renderer) test(pos int, name string, x value, args []value) (bool, error) {
	_, isUndef := x.(undefined)
	_, isInt := x.(int64)
	_, isBool := x.(bool)
	_, isStr := x.(string)
	_, isList := x.([]value)
	_, isDict := x.(*dict)
	switch name {
	case "defined":
		return !isUndef, nil
	case "undefined":
		return isUndef, nil
	case "none":
		return x == nil, nil
	case "string":
		return isStr, nil
	case "number":
		return isInt || isBool, nil
	case "integer":
		return isInt, nil
	case "boolean":
		return isBool, nil
	case "true", "false":
		b, ok := x.(bool)
		return ok && b == (name == "true"), nil
	case "mapping":
		return isDict, nil
	case "iterable", "sequence":
		return isUndef || isStr || isList || isDict, nil
	case "even", "odd", "divisibleby":
		n, err := r.int(pos, x)
		if err != nil {
			return false, err
		}
		d := int64(2)
		if name == "divisibleby" {
			if d, err = r.int(pos, args[0]); err != nil {
				return false, err
			}
			if d == 0 {
				return false, r.errAt(pos, "divisibleby(0)")
			}
		}
		return (n%d == 0) != (name == "odd"), nil
	case "eq":
		return equal(x, args[0]), nil
	case "ne":
		return !equal(x, args[0]), nil
	case "in":
		return r.contains(pos, args[0], x)
	}
	return false, r.errAt(pos, "the test %q is not supported", name)
}

func (r *renderer) evalBinary(e binExpr) (value, error) {
	l, err := r.eval(e.l)
	if err != nil {
		return nil, err
	}
	switch e.op { // and/or return an operand, as in Python
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(e.r)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(e.r)
	}
	rv, err := r.eval(e.r)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "==":
		return equal(l, rv), nil
	case "!=":
		return !equal(l, rv), nil
	case "in":
		return r.contains(e.pos, rv, l)
	case "not in":
		in, err := r.contains(e.pos, rv, l)
		return !in, err
	case "~":
		ls, err := r.str(e.pos, l)
		if err != nil {
			return nil, err
		}
		rs, err := r.str(e.pos, rv)
		if err != nil {
			return nil, err
		}
		return ls + rs, r.checkSize(e.pos, len(ls)+len(rs))
	}
	for _, v := range []value{l, rv} {
		if u, ok := v.(undefined); ok {
			return nil, r.errAt(e.pos, "%s", u.msg)
		}
	}
	switch e.op {
	case "<", "<=", ">", ">=":
		return r.compare(e.pos, e.op, l, rv)
	case "+":
		switch lv := l.(type) {
		case string:
			if rs, ok := rv.(string); ok {
				return lv + rs, r.checkSize(e.pos, len(lv)+len(rs))
			}
		case []value:
			if rl, ok := rv.([]value); ok {
				return append(append([]value{}, lv...), rl...), nil
			}
		}
	case "*":
		if s, ok := l.(string); ok {
			return r.repeat(e.pos, s, rv)
		}
		if s, ok := rv.(string); ok {
			return r.repeat(e.pos, s, l)
		}
	case "/", "**":
		return nil, r.errAt(e.pos, "the %s operator is not supported", e.op)
	case "%":
		if _, ok := l.(string); ok {
			return nil, r.errAt(e.pos, "string formatting with %% is not supported")
		}
	}
	a, aok := asInt(l)
	b, bok := asInt(rv)
	if !aok || !bok {
		return nil, r.errAt(e.pos, "unsupported operand types for %s: %s and %s", e.op, typeName(l), typeName(rv))
	}
	switch e.op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	}
	if b == 0 {
		return nil, r.errAt(e.pos, "integer division or modulo by zero")
	}
	q, m := a/b, a%b
	if m != 0 && (m < 0) != (b < 0) { // Python floors
		q, m = q-1, m+b
	}
	if e.op == "//" {
		return q, nil
	}
	return m, nil
}

func (r *renderer) repeat(pos int, s string, n value) (value, error) {
	k, ok := asInt(n)
	if !ok {
		return nil, r.errAt(pos, "cannot multiply a string by %s", typeName(n))
	}
	if k <= 0 {
		return "", nil
	}
	if err := r.checkSize(pos, int(min(k, maxOutput+1))*max(len(s), 1)); err != nil {
		return nil, err
	}
	return strings.Repeat(s, int(k)), nil
}

func (r *renderer) compare(pos int, op string, l, rv value) (value, error) {
	var c int
	ls, lok := l.(string)
	rs, rok := rv.(string)
	a, aok := asInt(l)
	b, bok := asInt(rv)
	switch {
	case lok && rok:
		c = strings.Compare(ls, rs) // UTF-8 byte order is code point order
	case aok && bok:
		c = 0
		if a < b {
			c = -1
		} else if a > b {
			c = 1
		}
	default:
		return nil, r.errAt(pos, "cannot compare %s and %s with %s", typeName(l), typeName(rv), op)
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// contains is Python's "item in container".
func (r *renderer) contains(pos int, container, item value) (bool, error) {
	switch c := container.(type) {
	case undefined:
		return false, nil
	case string:
		s, ok := item.(string)
		if !ok {
			return false, r.errAt(pos, "'in <string>' requires a string on the left, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case []value:
		for _, v := range c {
			if equal(v, item) {
				return true, nil
			}
		}
		return false, nil
	case *dict:
		k, ok := item.(string)
		_, in := c.m[k]
		return ok && in, nil
	}
	return false, r.errAt(pos, "%s does not support 'in'", typeName(container))
}

func (r *renderer) int(pos int, v value) (int64, error) {
	if u, ok := v.(undefined); ok {
		return 0, r.errAt(pos, "%s", u.msg)
	}
	n, ok := asInt(v)
	if !ok {
		return 0, r.errAt(pos, "expected an integer, not %s", typeName(v))
	}
	return n, nil
}

// asInt reads an int, or a bool as Python does (True is 1).
func asInt(v value) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func truthy(v value) bool {
	switch v := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return v
	case int64:
		return v != 0
	case string:
		return v != ""
	case []value:
		return len(v) > 0
	case *dict:
		return len(v.keys) > 0
	}
	return true
}

// equal is Python's ==.
func equal(a, b value) bool {
	if x, ok := asInt(a); ok {
		y, ok := asInt(b)
		return ok && x == y
	}
	switch a := a.(type) {
	case nil:
		return b == nil
	case undefined:
		_, ok := b.(undefined)
		return ok
	case string:
		s, ok := b.(string)
		return ok && a == s
	case []value:
		l, ok := b.([]value)
		if !ok || len(l) != len(a) {
			return false
		}
		for i := range a {
			if !equal(a[i], l[i]) {
				return false
			}
		}
		return true
	case *dict:
		d, ok := b.(*dict)
		if !ok || len(d.keys) != len(a.keys) {
			return false
		}
		for k, v := range a.m {
			if w, ok := d.m[k]; !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

func typeName(v value) string {
	switch v.(type) {
	case nil:
		return "None"
	case undefined:
		return "an undefined value"
	case bool:
		return "a bool"
	case int64:
		return "an int"
	case string:
		return "a string"
	case []value:
		return "a list"
	case *dict:
		return "a dict"
	case *namespace:
		return "a namespace"
	case *loopState:
		return "the loop object"
	}
	return fmt.Sprintf("%T", v)
}

// str is Python's str(), which jinja2 prints values with.
func (r *renderer) str(pos int, v value) (string, error) {
	switch v := v.(type) {
	case undefined:
		return "", nil
	case string:
		return v, nil
	case *loopState:
		return "", r.errAt(pos, "printing the loop object is not supported")
	}
	return repr(v), nil
}

// repr is Python's repr() of a value.
func repr(v value) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case undefined:
		return "Undefined"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return pyQuote(v)
	case []value:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = repr(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *dict:
		parts := make([]string, len(v.keys))
		for i, k := range v.keys {
			parts[i] = pyQuote(k) + ": " + repr(v.m[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *namespace:
		return "<Namespace " + repr(v.attrs) + ">"
	}
	return fmt.Sprintf("<%s>", typeName(v))
}

// pyQuote is Python's repr() of a string.
func pyQuote(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, c := range s {
		switch {
		case c == rune(q) || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == ' ' || c >= 0x20 && c < 0x7f || c > 0xff && unicode.IsPrint(c) || c >= 0xa1 && c <= 0xff && c != 0xad:
			b.WriteRune(c)
		case c <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, c)
		case c <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			fmt.Fprintf(&b, `\U%08x`, c)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// toJSON writes v as Python's json.dumps(v, ensure_ascii=False) does, which
// is what transformers' tojson filter calls.
func (r *renderer) toJSON(pos int, b *strings.Builder, v value) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case string:
		jsonString(b, v)
	case []value:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := r.toJSON(pos, b, x); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case *dict:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			jsonString(b, k)
			b.WriteString(": ")
			if err := r.toJSON(pos, b, v.m[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return r.errAt(pos, "tojson cannot encode %s", typeName(v))
	}
	return r.checkSize(pos, b.Len())
}

func jsonString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteRune(c)
			}
		}
	}
	b.WriteByte('"')
}

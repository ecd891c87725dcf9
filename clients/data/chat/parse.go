package chat

import (
	"strconv"
)

// Statements.
type (
	stmt interface{ at() int }

	textStmt   struct{ text string }
	outputStmt struct{ x expr }
	ifStmt     struct {
		conds  []expr
		bodies [][]stmt // one per cond, then the else body if any
	}
	forStmt struct {
		pos      int
		targets  []string
		iter     expr
		cond     expr // the "for ... if cond" filter, or nil
		body     []stmt
		elseBody []stmt
	}
	setStmt struct {
		pos        int
		name, attr string // attr is set for "set ns.attr = ..."
		x          expr
	}
	loopCtlStmt struct {
		pos   int
		isBrk bool
	}
)

func (textStmt) at() int      { return 0 }
func (s outputStmt) at() int  { return s.x.at() }
func (s ifStmt) at() int      { return s.conds[0].at() }
func (s forStmt) at() int     { return s.pos }
func (s setStmt) at() int     { return s.pos }
func (s loopCtlStmt) at() int { return s.pos }

// Expressions.
type (
	expr interface{ at() int }

	litExpr struct {
		pos int
		v   value
	}
	nameExpr struct {
		pos  int
		name string
	}
	listExpr struct {
		pos   int
		items []expr
	}
	dictExpr struct {
		pos        int
		keys, vals []expr
	}
	attrExpr struct {
		pos  int
		x    expr
		name string
	}
	itemExpr struct {
		pos    int
		x, key expr
	}
	sliceExpr struct {
		pos             int
		x, lo, hi, step expr
	}
	callExpr struct {
		pos    int
		fn     expr // a nameExpr (a global function) or an attrExpr (a method)
		args   []expr
		kwargs []kwarg
	}
	filterExpr struct {
		pos  int
		x    expr
		name string
		args []expr
	}
	testExpr struct {
		pos    int
		x      expr
		name   string
		args   []expr
		negate bool
	}
	binExpr struct {
		pos  int
		op   string
		l, r expr
	}
	unaryExpr struct {
		pos int
		op  string
		x   expr
	}
	condExpr struct {
		pos             int
		cond, then, els expr
	}
)

type kwarg struct {
	name string
	x    expr
}

func (e litExpr) at() int    { return e.pos }
func (e nameExpr) at() int   { return e.pos }
func (e listExpr) at() int   { return e.pos }
func (e dictExpr) at() int   { return e.pos }
func (e attrExpr) at() int   { return e.pos }
func (e itemExpr) at() int   { return e.pos }
func (e sliceExpr) at() int  { return e.pos }
func (e callExpr) at() int   { return e.pos }
func (e filterExpr) at() int { return e.pos }
func (e testExpr) at() int   { return e.pos }
func (e binExpr) at() int    { return e.pos }
func (e unaryExpr) at() int  { return e.pos }
func (e condExpr) at() int   { return e.pos }

// What a template may call. Everything else is refused when parsing.
var (
	globalFuncs = map[string]bool{"raise_exception": true, "namespace": true, "range": true}
	methods     = map[string]bool{"strip": true, "lstrip": true, "rstrip": true, "startswith": true, "endswith": true,
		"split": true, "title": true, "upper": true, "lower": true}
	filters = map[string]bool{"trim": true, "length": true, "count": true, "upper": true, "lower": true,
		"default": true, "d": true, "tojson": true}
	tests = map[string]bool{"defined": true, "undefined": true, "none": true, "string": true, "number": true,
		"integer": true, "boolean": true, "true": true, "false": true, "mapping": true, "iterable": true,
		"sequence": true, "even": true, "odd": true, "divisibleby": true, "eq": true, "ne": true, "in": true}
)

type parser struct {
	src   string
	toks  []token
	i     int
	loops int // how many for bodies enclose the current statement
}

func parse(src string) ([]stmt, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	body, end, err := p.stmts()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, p.errAt(p.toks[p.i-1].pos, "unexpected {%% %s %%}", end)
	}
	return body, nil
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return errAt(p.src, pos, format, args...)
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.peek()
	return t.kind == tokName && t.val == name
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return p.errAt(p.peek().pos, "expected %q, found %s", op, describe(p.peek()))
	}
	p.next()
	return nil
}

func (p *parser) expectKind(k tokKind, what string) (token, error) {
	t := p.next()
	if t.kind != k {
		return t, p.errAt(t.pos, "expected %s, found %s", what, describe(t))
	}
	return t, nil
}

func describe(t token) string {
	switch t.kind {
	case tokEOF:
		return "the end of the template"
	case tokVarEnd:
		return "\"}}\""
	case tokBlockEnd:
		return "\"%}\""
	case tokString:
		return "a string"
	case tokText:
		return "text"
	}
	return strconv.Quote(t.val)
}

// stmts parses statements up to the end of the template or a block tag it
// does not open (endfor, else, ...), which it returns after consuming the
// tag's name.
func (p *parser) stmts() (body []stmt, end string, err error) {
	for {
		t := p.next()
		switch t.kind {
		case tokEOF:
			return body, "", nil
		case tokText:
			body = append(body, textStmt{t.val})
		case tokVarBegin:
			x, err := p.expr()
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tokVarEnd, "\"}}\""); err != nil {
				return nil, "", err
			}
			body = append(body, outputStmt{x})
		case tokBlockBegin:
			name, err := p.expectKind(tokName, "a statement name")
			if err != nil {
				return nil, "", err
			}
			var s stmt
			switch name.val {
			case "if":
				s, err = p.ifStmt()
			case "for":
				s, err = p.forStmt(name.pos)
			case "set":
				s, err = p.setStmt(name.pos)
			case "break", "continue":
				if p.loops == 0 {
					return nil, "", p.errAt(name.pos, "{%% %s %%} outside a loop", name.val)
				}
				s = loopCtlStmt{name.pos, name.val == "break"}
			case "endif", "elif", "else", "endfor":
				return body, name.val, nil
			default:
				return nil, "", p.errAt(name.pos, "{%% %s %%} is not supported", name.val)
			}
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tokBlockEnd, "\"%}\""); err != nil {
				return nil, "", err
			}
			body = append(body, s)
		default:
			return nil, "", p.errAt(t.pos, "unexpected %s", describe(t))
		}
	}
}

// body parses a block's statements and checks which tag ends them.
func (p *parser) body(start int, opener string, ends ...string) ([]stmt, string, error) {
	body, end, err := p.stmts()
	if err != nil {
		return nil, "", err
	}
	for _, e := range ends {
		if end == e {
			return body, end, nil
		}
	}
	if end == "" {
		return nil, "", p.errAt(start, "{%% %s %%} is never closed", opener)
	}
	return nil, "", p.errAt(p.toks[p.i-1].pos, "unexpected {%% %s %%} inside {%% %s %%}", end, opener)
}

func (p *parser) ifStmt() (stmt, error) {
	var s ifStmt
	start := p.toks[p.i-1].pos
	for {
		cond, err := p.expr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expectKind(tokBlockEnd, "\"%}\""); err != nil {
			return nil, err
		}
		s.conds = append(s.conds, cond)
		b, end, err := p.body(start, "if", "elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		s.bodies = append(s.bodies, b)
		switch end {
		case "elif":
			continue
		case "else":
			if _, err := p.expectKind(tokBlockEnd, "\"%}\""); err != nil {
				return nil, err
			}
			b, _, err := p.body(start, "if", "endif")
			if err != nil {
				return nil, err
			}
			s.bodies = append(s.bodies, b)
		}
		return s, nil
	}
}

func (p *parser) forStmt(pos int) (stmt, error) {
	s := forStmt{pos: pos}
	for {
		t, err := p.expectKind(tokName, "a loop variable")
		if err != nil {
			return nil, err
		}
		s.targets = append(s.targets, t.val)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if !p.isName("in") {
		return nil, p.errAt(p.peek().pos, "expected \"in\", found %s", describe(p.peek()))
	}
	p.next()
	var err error
	// The iterable is parsed without the inline if, which belongs to the loop.
	if s.iter, err = p.or(); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.next()
		if s.cond, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, p.errAt(p.peek().pos, "recursive loops are not supported")
	}
	if _, err := p.expectKind(tokBlockEnd, "\"%}\""); err != nil {
		return nil, err
	}
	var end string
	p.loops++
	s.body, end, err = p.body(pos, "for", "else", "endfor")
	p.loops--
	if err != nil {
		return nil, err
	}
	if end == "else" {
		if _, err := p.expectKind(tokBlockEnd, "\"%}\""); err != nil {
			return nil, err
		}
		if s.elseBody, _, err = p.body(pos, "for", "endfor"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (p *parser) setStmt(pos int) (stmt, error) {
	name, err := p.expectKind(tokName, "a variable name")
	if err != nil {
		return nil, err
	}
	s := setStmt{pos: pos, name: name.val}
	if p.isOp(".") {
		p.next()
		attr, err := p.expectKind(tokName, "an attribute name")
		if err != nil {
			return nil, err
		}
		s.attr = attr.val
	}
	if p.peek().kind == tokBlockEnd {
		return nil, p.errAt(pos, "block assignments ({%% set %%}...{%% endset %%}) are not supported")
	}
	if p.isOp(",") {
		return nil, p.errAt(p.peek().pos, "assigning to several variables at once is not supported")
	}
	if err := p.expectOp("="); err != nil {
		return nil, err
	}
	s.x, err = p.expr()
	return s, err
}

// Expressions, in jinja2's order of precedence.

func (p *parser) expr() (expr, error) {
	x, err := p.or()
	if err != nil || !p.isName("if") {
		return x, err
	}
	pos := p.next().pos
	cond, err := p.or()
	if err != nil {
		return nil, err
	}
	var els expr
	if p.isName("else") {
		p.next()
		if els, err = p.expr(); err != nil {
			return nil, err
		}
	}
	return condExpr{pos, cond, x, els}, nil
}

// binary parses a left-associative chain of operators over sub.
func (p *parser) binary(sub func() (expr, error), match func() (string, bool)) (expr, error) {
	x, err := sub()
	if err != nil {
		return nil, err
	}
	for {
		op, ok := match()
		if !ok {
			return x, nil
		}
		pos := p.next().pos
		r, err := sub()
		if err != nil {
			return nil, err
		}
		x = binExpr{pos, op, x, r}
	}
}

func (p *parser) nameOp(names ...string) func() (string, bool) {
	return func() (string, bool) {
		for _, n := range names {
			if p.isName(n) {
				return n, true
			}
		}
		return "", false
	}
}

func (p *parser) symOp(ops ...string) func() (string, bool) {
	return func() (string, bool) {
		for _, o := range ops {
			if p.isOp(o) {
				return o, true
			}
		}
		return "", false
	}
}

func (p *parser) or() (expr, error)  { return p.binary(p.and, p.nameOp("or")) }
func (p *parser) and() (expr, error) { return p.binary(p.not, p.nameOp("and")) }

func (p *parser) not() (expr, error) {
	if !p.isName("not") {
		return p.compare()
	}
	pos := p.next().pos
	x, err := p.not()
	return unaryExpr{pos, "not", x}, err
}

func (p *parser) compare() (expr, error) {
	chained := false
	x, err := p.math1()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tokOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
		case p.isName("in"):
			op = "in"
		case p.isName("not") && p.toks[p.i+1].kind == tokName && p.toks[p.i+1].val == "in":
			p.next()
			op = "not in"
		default:
			return x, nil
		}
		if chained {
			return nil, p.errAt(t.pos, "chained comparisons are not supported")
		}
		chained = true
		p.next()
		r, err := p.math1()
		if err != nil {
			return nil, err
		}
		x = binExpr{t.pos, op, x, r}
	}
}

func (p *parser) math1() (expr, error)  { return p.binary(p.concat, p.symOp("+", "-")) }
func (p *parser) concat() (expr, error) { return p.binary(p.math2, p.symOp("~")) }
func (p *parser) math2() (expr, error)  { return p.binary(p.pow, p.symOp("*", "//", "%", "/")) }
func (p *parser) pow() (expr, error)    { return p.binary(p.unaryWithFilters, p.symOp("**")) }

func (p *parser) unaryWithFilters() (expr, error) { return p.unary(true) }

func (p *parser) unary(withFilters bool) (expr, error) {
	var x expr
	var err error
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		var operand expr
		if operand, err = p.unary(false); err != nil {
			return nil, err
		}
		x = unaryExpr{t.pos, t.val, operand}
	} else if x, err = p.primary(); err != nil {
		return nil, err
	}
	if x, err = p.postfix(x); err != nil {
		return nil, err
	}
	if withFilters {
		return p.filters(x)
	}
	return x, nil
}

func (p *parser) primary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tokName:
		switch t.val {
		case "true", "True":
			return litExpr{t.pos, true}, nil
		case "false", "False":
			return litExpr{t.pos, false}, nil
		case "none", "None":
			return litExpr{t.pos, nil}, nil
		}
		return nameExpr{t.pos, t.val}, nil
	case tokString:
		s := t.val
		for p.peek().kind == tokString { // adjacent literals concatenate
			s += p.next().val
		}
		return litExpr{t.pos, s}, nil
	case tokInt:
		n, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			return nil, p.errAt(t.pos, "integer %s is out of range", t.val)
		}
		return litExpr{t.pos, n}, nil
	case tokOp:
		switch t.val {
		case "(":
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				return nil, p.errAt(p.peek().pos, "tuples are not supported")
			}
			return x, p.expectOp(")")
		case "[":
			items, err := p.list("]")
			return listExpr{t.pos, items}, err
		case "{":
			return p.dict(t.pos)
		}
	}
	return nil, p.errAt(t.pos, "unexpected %s", describe(t))
}

// list parses comma-separated expressions up to close.
func (p *parser) list(close string) ([]expr, error) {
	var items []expr
	for !p.isOp(close) {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp(close) {
				break
			}
		}
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	p.next()
	return items, nil
}

func (p *parser) dict(pos int) (expr, error) {
	d := dictExpr{pos: pos}
	for !p.isOp("}") {
		if len(d.keys) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp("}") {
				break
			}
		}
		k, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		d.keys, d.vals = append(d.keys, k), append(d.vals, v)
	}
	p.next()
	return d, nil
}

func (p *parser) postfix(x expr) (expr, error) {
	for {
		t := p.peek()
		switch {
		case p.isOp("."):
			p.next()
			name := p.next()
			switch name.kind {
			case tokName:
				x = attrExpr{name.pos, x, name.val}
			case tokInt:
				n, _ := strconv.ParseInt(name.val, 10, 64)
				x = itemExpr{name.pos, x, litExpr{name.pos, n}}
			default:
				return nil, p.errAt(name.pos, "expected an attribute name, found %s", describe(name))
			}
		case p.isOp("["):
			p.next()
			var err error
			if x, err = p.subscript(t.pos, x); err != nil {
				return nil, err
			}
		case p.isOp("("):
			var err error
			if x, err = p.call(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
	}
}

// subscript parses what follows "[": an index or a slice.
func (p *parser) subscript(pos int, x expr) (expr, error) {
	var parts [3]expr
	n := 0
	for {
		if !p.isOp(":") && !p.isOp("]") {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			parts[n] = e
		}
		if !p.isOp(":") || n == 2 {
			break
		}
		p.next()
		n++
	}
	if err := p.expectOp("]"); err != nil {
		return nil, err
	}
	if n == 0 {
		if parts[0] == nil {
			return nil, p.errAt(pos, "empty subscript")
		}
		return itemExpr{pos, x, parts[0]}, nil
	}
	return sliceExpr{pos, x, parts[0], parts[1], parts[2]}, nil
}

func (p *parser) call(fn expr) (expr, error) {
	pos := p.next().pos
	c := callExpr{pos: pos, fn: fn}
	switch f := fn.(type) {
	case nameExpr:
		if !globalFuncs[f.name] {
			return nil, p.errAt(f.pos, "the function %s() is not supported", f.name)
		}
	case attrExpr:
		if !methods[f.name] {
			return nil, p.errAt(f.pos, "the method .%s() is not supported", f.name)
		}
	default:
		return nil, p.errAt(pos, "only named functions and methods can be called")
	}
	args, kwargs, err := p.args()
	c.args, c.kwargs = args, kwargs
	return c, err
}

// args parses call arguments after "(", through ")".
func (p *parser) args() ([]expr, []kwarg, error) {
	var args []expr
	var kwargs []kwarg
	for !p.isOp(")") {
		if len(args)+len(kwargs) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		if p.peek().kind == tokName && p.toks[p.i+1].kind == tokOp && p.toks[p.i+1].val == "=" {
			name := p.next().val
			p.next()
			x, err := p.expr()
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name, x})
			continue
		}
		if len(kwargs) > 0 {
			return nil, nil, p.errAt(p.peek().pos, "a positional argument follows a keyword argument")
		}
		x, err := p.expr()
		if err != nil {
			return nil, nil, err
		}
		args = append(args, x)
	}
	p.next()
	return args, kwargs, nil
}

// filters parses "| filter" and "is test" suffixes.
func (p *parser) filters(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			name, err := p.expectKind(tokName, "a filter name")
			if err != nil {
				return nil, err
			}
			if !filters[name.val] {
				return nil, p.errAt(name.pos, "the filter %q is not supported", name.val)
			}
			f := filterExpr{pos: name.pos, x: x, name: name.val}
			if p.isOp("(") {
				p.next()
				args, kwargs, err := p.args()
				if err != nil {
					return nil, err
				}
				if len(kwargs) > 0 {
					return nil, p.errAt(name.pos, "keyword arguments to the filter %q are not supported", name.val)
				}
				f.args = args
			}
			x = f
		case p.isName("is"):
			p.next()
			t := testExpr{x: x}
			if p.isName("not") {
				p.next()
				t.negate = true
			}
			name := p.next()
			if name.kind != tokName {
				return nil, p.errAt(name.pos, "expected a test name, found %s", describe(name))
			}
			if !tests[name.val] {
				return nil, p.errAt(name.pos, "the test %q is not supported", name.val)
			}
			t.pos, t.name = name.pos, name.val
			if p.isOp("(") {
				p.next()
				args, kwargs, err := p.args()
				if err != nil {
					return nil, err
				}
				if len(kwargs) > 0 {
					return nil, p.errAt(name.pos, "keyword arguments to the test %q are not supported", name.val)
				}
				t.args = args
			} else if k := p.peek(); k.kind == tokString || k.kind == tokInt || k.kind == tokName && !isKeyword(k.val) {
				// "is divisibleby 3": one argument without parentheses.
				arg, err := p.primary()
				if err != nil {
					return nil, err
				}
				if arg, err = p.postfix(arg); err != nil {
					return nil, err
				}
				t.args = []expr{arg}
			}
			x = t
		case p.isOp("("):
			return nil, p.errAt(p.peek().pos, "only named functions and methods can be called")
		default:
			return x, nil
		}
	}
}

func isKeyword(s string) bool {
	switch s {
	case "and", "or", "not", "in", "is", "if", "else":
		return true
	}
	return false
}

package template

// Expression nodes. Every node records the byte offset of its first token
// for error positions.

type expr interface{ offset() int }

type (
	constExpr struct {
		p int
		v any // nil, bool, int64, float64 or string
	}
	nameExpr struct {
		p    int
		name string
	}
	attrExpr struct { // x.name
		p    int
		x    expr
		attr string
	}
	itemExpr struct { // x[key]
		p   int
		x   expr
		key expr
	}
	sliceExpr struct { // start:stop:step inside []
		p                 int
		start, stop, step expr // nil when omitted
	}
	callExpr struct {
		p      int
		fn     expr
		args   []expr
		kwargs []kwarg
	}
	filterExpr struct { // x | name(args); x is nil in filter and set blocks
		p      int
		x      expr
		name   string
		args   []expr
		kwargs []kwarg
		fn     *filterDef
	}
	testExpr struct { // x is name(args)
		p      int
		x      expr
		name   string
		args   []expr
		kwargs []kwarg
		fn     *testDef
	}
	notExpr struct {
		p int
		x expr
	}
	unaryExpr struct { // -x or +x
		p   int
		neg bool
		x   expr
	}
	binExpr struct { // + - * / // % ** and or
		p    int
		op   string
		l, r expr
	}
	concatExpr struct { // a ~ b ~ c
		p     int
		parts []expr
	}
	compareExpr struct { // a < b == c, a in b, a not in b
		p     int
		first expr
		ops   []cmpOp
	}
	condExpr struct { // then if test else els
		p               int
		test, then, els expr // els may be nil
	}
	listExpr struct {
		p     int
		items []expr
	}
	tupleExpr struct {
		p     int
		items []expr
	}
	dictExpr struct {
		p          int
		keys, vals []expr
	}
)

type kwarg struct {
	name string
	val  expr
}

type cmpOp struct {
	op string // "==", "!=", "<", "<=", ">", ">=", "in", "notin"
	x  expr
}

func (e *constExpr) offset() int   { return e.p }
func (e *nameExpr) offset() int    { return e.p }
func (e *attrExpr) offset() int    { return e.p }
func (e *itemExpr) offset() int    { return e.p }
func (e *sliceExpr) offset() int   { return e.p }
func (e *callExpr) offset() int    { return e.p }
func (e *filterExpr) offset() int  { return e.p }
func (e *testExpr) offset() int    { return e.p }
func (e *notExpr) offset() int     { return e.p }
func (e *unaryExpr) offset() int   { return e.p }
func (e *binExpr) offset() int     { return e.p }
func (e *concatExpr) offset() int  { return e.p }
func (e *compareExpr) offset() int { return e.p }
func (e *condExpr) offset() int    { return e.p }
func (e *listExpr) offset() int    { return e.p }
func (e *tupleExpr) offset() int   { return e.p }
func (e *dictExpr) offset() int    { return e.p }

// target is the left side of an assignment or a loop variable: a name, a
// (possibly nested) tuple of targets, or a namespace attribute ns.attr.
type target struct {
	p      int
	name   string    // plain name
	items  []*target // tuple unpacking when non-nil
	nsAttr string    // with name: assignment to name.nsAttr
}

// Statement nodes.

type node interface{}

type (
	textNode struct {
		s string
	}
	printNode struct {
		p int
		x expr
	}
	ifNode struct {
		p      int
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		p      int
		target *target
		iter   expr
		cond   expr // loop filter ({% for x in y if cond %}), nil if none
		body   []node
		els    []node
	}
	setNode struct {
		p      int
		target *target
		x      expr
	}
	setBlockNode struct {
		p       int
		target  *target
		filters []*filterExpr // applied in order to the captured text
		body    []node
	}
	macroNode struct {
		p        int
		name     string
		params   []string
		defaults []expr // defaults for the last len(defaults) params
		body     []node
		// catchVarargs and catchKwargs say the body reads varargs or
		// kwargs, so extra arguments are collected instead of refused.
		catchVarargs, catchKwargs bool
	}
	filterBlockNode struct {
		p       int
		filters []*filterExpr
		body    []node
	}
	withNode struct {
		p       int
		targets []*target
		vals    []expr
		body    []node
	}
	breakNode struct {
		p int
	}
	continueNode struct {
		p int
	}
	// generationNode is transformers' {% generation %} block (used to
	// mark assistant tokens); it renders its body unchanged.
	generationNode struct {
		p    int
		body []node
	}
)

package grammar

// nullable returns, for each rule, whether it can match the empty string.
func (g *Grammar) nullable() []bool {
	null := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for i, r := range g.rules {
			if null[i] {
				continue
			}
			for _, alt := range r.alts {
				if g.seqNullable(alt, null) {
					null[i], changed = true, true
					break
				}
			}
		}
	}
	return null
}

func (g *Grammar) seqNullable(seq []elem, null []bool) bool {
	for _, e := range seq {
		if e.kind != elRule || !null[e.rule] {
			return false
		}
	}
	return true
}

// checkLeftRecursion refuses a rule that can reach itself without
// consuming input (a ::= a "x", or through nullable prefixes), which a
// top-down recognizer cannot run.
func (g *Grammar) checkLeftRecursion() error {
	null := g.nullable()
	// left[r]: rules r can begin with.
	left := make([][]int, len(g.rules))
	for i, r := range g.rules {
		for _, alt := range r.alts {
			for _, e := range alt {
				if e.kind != elRule {
					break
				}
				left[i] = append(left[i], e.rule)
				if !null[e.rule] {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(g.rules))
	// Iterative DFS: grammars from the network may be deep.
	type frame struct{ r, next int }
	for start := range g.rules {
		if color[start] != white {
			continue
		}
		stack := []frame{{start, 0}}
		color[start] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(left[f.r]) {
				color[f.r] = black
				stack = stack[:len(stack)-1]
				continue
			}
			s := left[f.r][f.next]
			f.next++
			switch color[s] {
			case grey:
				return &RuleError{Rule: g.rules[s].name, Reason: "is left-recursive (it can reach itself without consuming input)"}
			case white:
				color[s] = grey
				stack = append(stack, frame{s, 0})
			}
		}
	}
	return nil
}

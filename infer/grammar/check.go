package grammar

// nullable returns, for each rule, whether it can match the empty string,
// in time linear in the grammar's size: each alternative counts the rule
// references it still waits on, and a rule found nullable releases the
// alternatives that wait on it.
func (g *Grammar) nullable() []bool {
	null := make([]bool, len(g.rules))
	type altRef struct{ rule, pending int }
	var alts []altRef
	users := make([][]int, len(g.rules)) // per rule, alternatives that refer to it (once per reference)
	var queue []int
	for ri, r := range g.rules {
		for _, alt := range r.alts {
			a := len(alts)
			alts = append(alts, altRef{rule: ri})
			chars := false
			for _, e := range alt {
				if e.kind != elRule {
					chars = true
					break
				}
			}
			if chars {
				continue // never empty
			}
			alts[a].pending = len(alt)
			for _, e := range alt {
				users[e.rule] = append(users[e.rule], a)
			}
			if len(alt) == 0 && !null[ri] {
				null[ri] = true
				queue = append(queue, ri)
			}
		}
	}
	for len(queue) > 0 {
		r := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, a := range users[r] {
			if alts[a].pending--; alts[a].pending == 0 && !null[alts[a].rule] {
				null[alts[a].rule] = true
				queue = append(queue, alts[a].rule)
			}
		}
	}
	return null
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

package main

import "strings"

// The JSON-answer part of the corpus: a request for JSON (in the system
// prompt, with or without a schema, or at the end of the user message) and
// answers that are JSON objects of the facts the chat corpus teaches.

var jsonSystemPrompts = []string{
	"Answer in JSON.", "Reply with a JSON object.", "You only answer with JSON.", "Respond in JSON format.",
	"Give your answer as a JSON object.", "Always answer with a JSON object.",
}

var jsonSchemaPrompts = []string{
	"Answer with a JSON object that matches this schema: {s}",
	"Reply in JSON. Use this schema: {s}",
	"Respond with JSON following this schema: {s}",
}

var jsonUserSuffixes = []string{"Answer in JSON.", "Reply in JSON.", "Give me JSON.", "Respond with a JSON object."}

// jsonFact is a question and its answer as the fields of a JSON object.
type jsonFact struct {
	user   string
	fields []arg
}

func jsonFacts() []func(r *rng) jsonFact {
	arithFact := func(qs []string, max int, key string, f func(a, b int) (int, bool)) func(r *rng) jsonFact {
		return func(r *rng) jsonFact {
			var a, b, c int
			for {
				a, b = r.rangeIn(0, max), r.rangeIn(0, max)
				var ok bool
				if c, ok = f(a, b); ok {
					break
				}
			}
			q := expand(r, pick(r, qs), map[string]string{"a": num(a), "b": num(b)})
			return jsonFact{q, []arg{{"a", a}, {"b", b}, {key, c}}}
		}
	}
	return []func(r *rng) jsonFact{
		arithFact(addQs, addMax, "sum", func(a, b int) (int, bool) { return a + b, true }),
		arithFact(subQs, subMax, "difference", func(a, b int) (int, bool) { return a - b, a >= b }),
		arithFact(mulQs, mulMax, "product", func(a, b int) (int, bool) { return a * b, true }),
		func(r *rng) jsonFact {
			a := pickAnimal(r, func(a animal) bool { return a.legs >= 0 })
			q := expand(r, "[How many legs does {a} have?|How many legs has {a} got?|Tell me how many legs {a} has.]", map[string]string{"a": article(a.name) + " " + a.name})
			return jsonFact{q, []arg{{"animal", a.name}, {"legs", a.legs}}}
		},
		func(r *rng) jsonFact {
			c := pick(r, capitals)
			q := expand(r, "[What is the capital of {c}?|What's the capital of {c}?|Which city is the capital of {c}?|Tell me the capital of {c}.]", map[string]string{"c": c.country})
			return jsonFact{q, []arg{{"country", c.country}, {"capital", c.city}}}
		},
		func(r *rng) jsonFact {
			t := pick(r, colourThings)
			q := expand(r, "[What colour is {x}?|What color is {x}?|What is the colour of {x}?]", map[string]string{"x": t.np})
			return jsonFact{q, []arg{{"thing", bareNoun(t.np)}, {"colour", t.colour}}}
		},
		func(r *rng) jsonFact {
			a := pickAnimal(r, func(a animal) bool { return a.sound != "" })
			q := expand(r, "[What sound does {a} make?|What does {a} say?]", map[string]string{"a": article(a.name) + " " + a.name})
			return jsonFact{q, []arg{{"animal", a.name}, {"sound", a.sound}}}
		},
		func(r *rng) jsonFact {
			w := pick(r, spellWords)
			q := expand(r, "[How do you spell {w}?|Spell {w}.|Can you spell {w}?|Spell the word {w}.]", map[string]string{"w": w})
			return jsonFact{q, []arg{{"word", w}, {"spelling", strings.Join(strings.Split(w, ""), "-")}}}
		},
		func(r *rng) jsonFact {
			i := r.intn(len(days))
			if r.chance(0.5) {
				q := expand(r, "[What day comes after {d}?|Which day is after {d}?|What is the day after {d}?]", map[string]string{"d": days[i]})
				return jsonFact{q, []arg{{"day", days[i]}, {"next_day", days[(i+1)%7]}}}
			}
			q := expand(r, "[What day comes before {d}?|Which day is before {d}?|What is the day before {d}?]", map[string]string{"d": days[i]})
			return jsonFact{q, []arg{{"day", days[i]}, {"previous_day", days[(i+6)%7]}}}
		},
		func(r *rng) jsonFact {
			p := pick(r, opposites)
			a, b := p[0], p[1]
			if r.chance(0.5) {
				a, b = b, a
			}
			q := expand(r, "[What is the opposite of {a}?|What's the opposite of {a}?]", map[string]string{"a": a})
			return jsonFact{q, []arg{{"word", a}, {"opposite", b}}}
		},
		func(r *rng) jsonFact {
			q := expand(r, "[What is your name?|What's your name?|What are you called?]", nil)
			return jsonFact{q, []arg{{"name", "Muser"}}}
		},
	}
}

// schemaJSON is the JSON schema of a fact's object, with tojson's
// separators.
func schemaJSON(fields []arg) string {
	var b strings.Builder
	b.WriteString(`{"type": "object", "properties": {`)
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		typ := "string"
		if _, ok := f.val.(int); ok {
			typ = "integer"
		}
		jsonString(&b, f.key)
		b.WriteString(`: {"type": "` + typ + `"}`)
	}
	b.WriteString(`}, "required": [`)
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		jsonString(&b, f.key)
	}
	b.WriteString("]}")
	return b.String()
}

// indentedJSON renders fields as Python's json.dumps(indent=2) does.
func indentedJSON(fields []arg) string {
	var b strings.Builder
	b.WriteString("{\n")
	for i, f := range fields {
		b.WriteString("  ")
		kv := argsJSON([]arg{f})
		b.WriteString(kv[1 : len(kv)-1])
		if i < len(fields)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

// jsonChat returns one rendered conversation whose answers are JSON
// objects: one exchange, or two under the same system prompt.
func jsonChat(r *rng, facts []func(*rng) jsonFact, excluded map[string]bool) string {
	var b strings.Builder
	draw := func() jsonFact {
		f := pick(r, facts)
		for {
			if jf := f(r); !excluded[jf.user] {
				return jf
			}
		}
	}
	indent := r.chance(0.3)
	answer := func(jf jsonFact) string {
		if indent {
			return indentedJSON(jf.fields)
		}
		return argsJSON(jf.fields)
	}
	first := draw()
	switch x := r.intn(10); {
	case x < 5:
		writeMsg(&b, "system", pick(r, jsonSystemPrompts))
	case x < 8:
		writeMsg(&b, "system", strings.Replace(pick(r, jsonSchemaPrompts), "{s}", schemaJSON(first.fields), 1))
		writeMsg(&b, "user", first.user)
		writeMsg(&b, "assistant", answer(first))
		return b.String() // a schema fits one question only
	default:
		// Asked in the user message, no system prompt.
		q := first.user + " " + pick(r, jsonUserSuffixes)
		writeMsg(&b, "user", q)
		writeMsg(&b, "assistant", answer(first))
		return b.String()
	}
	writeMsg(&b, "user", first.user)
	writeMsg(&b, "assistant", answer(first))
	if r.chance(0.3) {
		next := draw()
		writeMsg(&b, "user", next.user)
		writeMsg(&b, "assistant", answer(next))
	}
	return b.String()
}

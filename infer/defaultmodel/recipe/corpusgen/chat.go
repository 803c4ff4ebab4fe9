package main

import (
	"fmt"
	"strconv"
	"strings"
)

// turn is one user message and the assistant's reply.
type turn struct{ user, assistant string }

// task makes one turn of a kind. prev is the previous turn's task name in
// the conversation ("" for the first), so a task can ask a follow-up.
type task struct {
	name   string
	weight int
	make   func(r *rng, prev string) turn
}

var systemPrompts = []string{
	"You are a helpful assistant.",
	"You are Muser, a small helpful model.",
	"You are a friendly assistant. Keep your answers short.",
	"Answer the question.",
	"You are a kind helper for children.",
	"You are a helpful assistant. Answer in one sentence.",
}

// The ranges of the arithmetic the corpus teaches. Every pair in these
// ranges appears in a large enough corpus.
const (
	addMax = 20 // a + b with 0 <= a, b <= addMax
	subMax = 20 // a - b with 0 <= b <= a <= subMax
	mulMax = 10 // a * b with 0 <= a, b <= mulMax
)

func num(n int) string { return strconv.Itoa(n) }

func tasks() []task {
	return []task{
		{"add", 14, arith("plus", addMax, func(a, b int) (int, bool) { return a + b, true }, addQs)},
		{"sub", 10, arith("minus", subMax, func(a, b int) (int, bool) { return a - b, a >= b }, subQs)},
		{"mul", 10, arith("times", mulMax, func(a, b int) (int, bool) { return a * b, true }, mulQs)},
		{"word", 4, wordProblem},
		{"count", 6, count},
		{"next", 5, nextNumber},
		{"bigger", 3, bigger},
		{"spell", 8, spell},
		{"colour", 6, colour},
		{"sound", 5, sound},
		{"legs", 5, legs},
		{"baby", 3, baby},
		{"capital", 7, capitalQ},
		{"day", 5, dayQ},
		{"month", 4, monthQ},
		{"howmany", 2, howMany},
		{"opposite", 4, opposite},
		{"name", 2, identity},
		{"greet", 3, greeting},
		{"chat", 3, smallTalk},
		{"unknown", 3, unknown},
		{"story", 4, storyRequest},
	}
}

var addQs = []string{
	"What is {a} plus {b}?", "What is {a} + {b}?", "What's {a} plus {b}?", "How much is {a} plus {b}?",
	"Can you add {a} and {b}?", "Add {a} and {b}.", "What do you get when you add {a} and {b}?",
	"What is the sum of {a} and {b}?", "{a} plus {b} is what?", "Please add {a} and {b}.",
	"what is {a} plus {b}?", "Calculate {a} + {b}.", "What does {a} plus {b} make?", "What is {a} plus {b}",
}

var subQs = []string{
	"What is {a} minus {b}?", "What is {a} - {b}?", "What's {a} minus {b}?", "How much is {a} minus {b}?",
	"Subtract {b} from {a}.", "Can you subtract {b} from {a}?", "What is {a} take away {b}?",
	"What do you get when you take {b} from {a}?", "{a} minus {b} is what?", "Calculate {a} - {b}.",
	"what is {a} minus {b}?", "What is {a} minus {b}",
}

var mulQs = []string{
	"What is {a} times {b}?", "What is {a} x {b}?", "What is {a} * {b}?", "What's {a} times {b}?",
	"How much is {a} times {b}?", "Multiply {a} by {b}.", "Can you multiply {a} and {b}?",
	"What is {a} multiplied by {b}?", "What is the product of {a} and {b}?", "{a} times {b} is what?",
	"what is {a} times {b}?", "What is {a} times {b}",
}

// arith makes an arithmetic task. After another arithmetic turn it may ask
// a short follow-up ("And 5 plus 2?").
func arith(op string, max int, f func(a, b int) (int, bool), qs []string) func(*rng, string) turn {
	return func(r *rng, prev string) turn {
		var a, b, c int
		for {
			a, b = r.rangeIn(0, max), r.rangeIn(0, max)
			var ok bool
			if c, ok = f(a, b); ok {
				break
			}
		}
		v := map[string]string{"a": num(a), "b": num(b)}
		q := pick(r, qs)
		if (prev == "add" || prev == "sub" || prev == "mul") && r.chance(0.4) {
			q = pick(r, []string{"And {a} " + op + " {b}?", "What about {a} " + op + " {b}?", "And what is {a} " + op + " {b}?"})
		}
		ans := fmt.Sprintf("%d %s %d is %d.", a, op, b, c)
		if r.chance(0.1) {
			ans = fmt.Sprintf("%d %s %d equals %d.", a, op, b, c)
		}
		return turn{expand(r, q, v), ans}
	}
}

func plural(n int, t [2]string) string {
	if n == 1 {
		return "1 " + t[0]
	}
	return num(n) + " " + t[1]
}

func wordProblem(r *rng, _ string) turn {
	hero := newPerson(r)
	v := map[string]string{}
	bind(v, "", hero)
	t := pick(r, things)
	if r.chance(0.5) {
		a, b := r.rangeIn(1, 10), r.rangeIn(1, 10)
		v["a"], v["b"], v["t"] = plural(a, t), num(b), t[1]
		q := expand(r, "{name} has {a}. {He} [gets|finds|is given] {b} more. How many {t} does {he} have now?", v)
		return turn{q, fmt.Sprintf("%s has %s now.", hero.name, plural(a+b, t))}
	}
	a := r.rangeIn(2, 12)
	b := r.rangeIn(1, a)
	v["a"], v["b"], v["t"] = plural(a, t), num(b), t[1]
	v["friend"] = pick(r, append(append([]string{}, girlNames...), boyNames...))
	q := expand(r, "{name} has {a}. {He} [gives {b} to {friend}|eats {b}|loses {b}]. How many {t} does {he} have left?", v)
	return turn{q, fmt.Sprintf("%s has %s left.", hero.name, plural(a-b, t))}
}

func seq(a, b int) string {
	var parts []string
	for i := a; i <= b; i++ {
		parts = append(parts, num(i))
	}
	return strings.Join(parts, ", ")
}

func count(r *rng, _ string) turn {
	if r.chance(0.3) {
		n := r.rangeIn(2, 12)
		q := expand(r, "[Count to {n}.|Can you count to {n}?|Please count to {n}.|Count from 1 to {n}.]", map[string]string{"n": num(n)})
		return turn{q, seq(1, n) + "."}
	}
	a := r.rangeIn(0, 15)
	b := a + r.rangeIn(2, 10)
	q := expand(r, "[Count from {a} to {b}.|Can you count from {a} to {b}?|Please count from {a} to {b}.|Count from {a} up to {b}.]",
		map[string]string{"a": num(a), "b": num(b)})
	return turn{q, seq(a, b) + "."}
}

func nextNumber(r *rng, _ string) turn {
	if r.chance(0.6) {
		n := r.rangeIn(0, 50)
		q := expand(r, "[What number comes after {n}?|What comes after {n}?|What is the next number after {n}?|Which number is after {n}?]", map[string]string{"n": num(n)})
		return turn{q, fmt.Sprintf("The number after %d is %d.", n, n+1)}
	}
	n := r.rangeIn(1, 50)
	q := expand(r, "[What number comes before {n}?|What comes before {n}?|Which number is before {n}?]", map[string]string{"n": num(n)})
	return turn{q, fmt.Sprintf("The number before %d is %d.", n, n-1)}
}

func bigger(r *rng, _ string) turn {
	a, b := r.rangeIn(0, 30), r.rangeIn(0, 30)
	for a == b {
		b = r.rangeIn(0, 30)
	}
	hi, lo := max(a, b), min(a, b)
	if r.chance(0.5) {
		q := expand(r, "[Which is bigger, {a} or {b}?|Which number is bigger, {a} or {b}?|What is bigger, {a} or {b}?]", map[string]string{"a": num(a), "b": num(b)})
		return turn{q, fmt.Sprintf("%d is bigger than %d.", hi, lo)}
	}
	q := fmt.Sprintf("Is %d bigger than %d?", a, b)
	if a > b {
		return turn{q, fmt.Sprintf("Yes, %d is bigger than %d.", a, b)}
	}
	return turn{q, fmt.Sprintf("No, %d is bigger than %d.", b, a)}
}

func spell(r *rng, _ string) turn {
	w := pick(r, spellWords)
	q := expand(r, "[How do you spell {w}?|Spell {w}.|Can you spell {w}?|Please spell the word {w}.|How is {w} spelled?|Spell the word {w} for me.|How do you spell the word {w}?]", map[string]string{"w": w})
	return turn{q, fmt.Sprintf("The word %s is spelled %s.", w, strings.Join(strings.Split(w, ""), "-"))}
}

func colour(r *rng, _ string) turn {
	t := pick(r, colourThings)
	q := expand(r, "[What colour is {x}?|What color is {x}?|What is the colour of {x}?|What is the color of {x}?|Tell me the colour of {x}.|Which colour is {x}?]", map[string]string{"x": t.np})
	return turn{q, fmt.Sprintf("%s is %s.", capFirst(t.np), t.colour)}
}

func pickAnimal(r *rng, ok func(animal) bool) animal {
	for {
		if a := pick(r, animals); ok(a) {
			return a
		}
	}
}

func sound(r *rng, _ string) turn {
	a := pickAnimal(r, func(a animal) bool { return a.sound != "" })
	v := map[string]string{"a": article(a.name) + " " + a.name, "x": a.name, "p": a.plural}
	q := expand(r, "[What sound does {a} make?|What does {a} say?|What noise does {a} make?|What does the {x} say?|What sound do {p} make?]", v)
	return turn{q, fmt.Sprintf("%s %s says %s.", capFirst(article(a.name)), a.name, a.sound)}
}

func legs(r *rng, _ string) turn {
	a := pickAnimal(r, func(a animal) bool { return a.legs >= 0 })
	v := map[string]string{"a": article(a.name) + " " + a.name, "p": a.plural}
	q := expand(r, "[How many legs does {a} have?|How many legs has {a} got?|How many legs do {p} have?|Tell me how many legs {a} has.]", v)
	subj := capFirst(article(a.name)) + " " + a.name
	if a.legs == 0 {
		return turn{q, subj + " has no legs."}
	}
	return turn{q, fmt.Sprintf("%s has %d legs.", subj, a.legs)}
}

func baby(r *rng, _ string) turn {
	a := pickAnimal(r, func(a animal) bool { return a.baby != "" })
	q := expand(r, "[What is a baby {x} called?|What do you call a baby {x}?|What is the name for a baby {x}?]", map[string]string{"x": a.name})
	return turn{q, fmt.Sprintf("A baby %s is called %s %s.", a.name, article(a.baby), a.baby)}
}

func capitalQ(r *rng, _ string) turn {
	c := pick(r, capitals)
	v := map[string]string{"c": c.country, "x": c.city}
	if r.chance(0.2) {
		q := expand(r, "[{x} is the capital of which country?|Which country has {x} as its capital?|Where is {x}?]", v)
		return turn{q, fmt.Sprintf("%s is the capital of %s.", c.city, c.country)}
	}
	q := expand(r, "[What is the capital of {c}?|What's the capital of {c}?|Which city is the capital of {c}?|Tell me the capital of {c}.|What city is the capital of {c}?|Do you know the capital of {c}?|Name the capital of {c}.]", v)
	return turn{q, fmt.Sprintf("The capital of %s is %s.", c.country, c.city)}
}

// neighbour asks for the item after or before one of a cyclic list.
func neighbour(r *rng, list []string, what string) turn {
	i := r.intn(len(list))
	d, after := list[i], list[(i+1)%len(list)]
	before := list[(i+len(list)-1)%len(list)]
	v := map[string]string{"d": d, "w": what}
	if r.chance(0.5) {
		q := expand(r, "[What {w} comes after {d}?|What {w} is after {d}?|Which {w} comes after {d}?|What is the {w} after {d}?]", v)
		return turn{q, fmt.Sprintf("The %s after %s is %s.", what, d, after)}
	}
	q := expand(r, "[What {w} comes before {d}?|What {w} is before {d}?|Which {w} comes before {d}?|What is the {w} before {d}?]", v)
	return turn{q, fmt.Sprintf("The %s before %s is %s.", what, d, before)}
}

func dayQ(r *rng, _ string) turn {
	if r.chance(0.2) {
		i := r.intn(len(days))
		return turn{fmt.Sprintf("If today is %s, what day is tomorrow?", days[i]),
			fmt.Sprintf("If today is %s, tomorrow is %s.", days[i], days[(i+1)%len(days)])}
	}
	return neighbour(r, days, "day")
}

func monthQ(r *rng, _ string) turn { return neighbour(r, months, "month") }

func howMany(r *rng, _ string) turn {
	switch r.intn(4) {
	case 0:
		return turn{expand(r, "[How many days are in a week?|How many days does a week have?|How many days are there in a week?]", nil),
			"There are 7 days in a week."}
	case 1:
		return turn{expand(r, "[How many months are in a year?|How many months does a year have?|How many months are there in a year?]", nil),
			"There are 12 months in a year."}
	case 2:
		return turn{expand(r, "[What are the days of the week?|Name the days of the week.|Can you tell me the days of the week?]", nil),
			"The days of the week are " + strings.Join(days[:6], ", ") + " and " + days[6] + "."}
	}
	return turn{expand(r, "[What are the months of the year?|Name the months of the year.]", nil),
		"The months of the year are " + strings.Join(months[:11], ", ") + " and " + months[11] + "."}
}

func opposite(r *rng, _ string) turn {
	p := pick(r, opposites)
	a, b := p[0], p[1]
	if r.chance(0.5) {
		a, b = b, a
	}
	q := expand(r, "[What is the opposite of {a}?|What's the opposite of {a}?|Tell me the opposite of {a}.]", map[string]string{"a": a})
	return turn{q, fmt.Sprintf("The opposite of %s is %s.", a, b)}
}

func identity(r *rng, _ string) turn {
	switch r.intn(3) {
	case 0:
		return turn{expand(r, "[What is your name?|What's your name?|Tell me your name.|What are you called?|What should I call you?]", nil),
			"My name is Muser."}
	case 1:
		return turn{expand(r, "[Who are you?|What are you?|Are you a person?]", nil),
			"I am Muser, a small language model. I can answer simple questions and tell short stories."}
	}
	return turn{expand(r, "[What can you do?|How can you help me?|What do you know?]", nil),
		"I can do simple maths, count, spell words, and tell you about colours, animals, days, months and capitals. I can also tell short stories."}
}

func greeting(r *rng, _ string) turn {
	q := expand(r, "[Hello!|Hi!|Hi there.|Hey!|Good morning!|Good evening!|Hello.|Hi|hello]", nil)
	a := expand(r, "[Hello! How can I help you today?|Hi! How can I help you?|Hello! What would you like to know?]", nil)
	return turn{q, a}
}

func smallTalk(r *rng, _ string) turn {
	switch r.intn(3) {
	case 0:
		return turn{expand(r, "[How are you?|How are you today?|How are you doing?]", nil),
			"I am fine, thank you! How can I help you?"}
	case 1:
		return turn{expand(r, "[Thank you!|Thanks!|Thanks a lot.|Thank you very much.]", nil),
			expand(r, "[You are welcome!|You are welcome. Have a nice day!]", nil)}
	}
	return turn{expand(r, "[Goodbye!|Bye!|See you later.|Bye bye!]", nil),
		expand(r, "[Goodbye! Have a nice day!|Bye! See you soon!]", nil)}
}

func unknown(r *rng, _ string) turn {
	return turn{pick(r, unknownQuestions),
		expand(r, "[I am sorry, I do not know that.|I do not know that. I am only a small model.|Sorry, I cannot answer that. I am a small model.]", nil)}
}

func storyRequest(r *rng, _ string) turn {
	var spec storySpec
	v := map[string]string{}
	q := "[Tell me a story.|Tell me a short story.|Can you tell me a story?|Please tell me a story.|Write a short story.]"
	switch r.intn(4) {
	case 0:
		spec.heroKind = pick(r, animalKinds)
		v["k"] = spec.heroKind
		q = "[Tell me a story about {a} {k}.|Can you tell me a story about {a} {k}?|Write a short story about {a} {k}.]"
		v["a"] = article(spec.heroKind)
	case 1:
		c := newPerson(r)
		spec.heroKind, spec.heroName = c.kind, c.name
		v["n"], v["k"] = c.name, c.kind
		q = "[Tell me a story about {n}.|Please tell me a story about a {k} named {n}.|Write a story about a {k} called {n}.]"
	case 2:
		spec.object = pick(r, objects)
		v["o"] = spec.object
		v["a"] = article(spec.object)
		q = "[Tell me a story about {a} {o}.|Write a short story about {a} {o}.]"
	}
	return turn{expand(r, q, v), story(r, spec)}
}

// chat returns one rendered ChatML conversation. excluded holds user
// messages that must never appear (the held-out questions): a turn that
// would produce one is drawn again.
func chat(r *rng, ts []task, total int, excluded map[string]bool) string {
	var b strings.Builder
	if r.chance(0.3) {
		writeMsg(&b, "system", pick(r, systemPrompts))
	}
	n := 1
	for n < 4 && r.chance(0.45) {
		n++
	}
	prev := ""
	for i := 0; i < n; i++ {
		t := pickTask(r, ts, total)
		var tr turn
		for {
			tr = t.make(r, prev)
			if !excluded[tr.user] {
				break
			}
		}
		writeMsg(&b, "user", tr.user)
		writeMsg(&b, "assistant", tr.assistant)
		prev = t.name
	}
	return b.String()
}

func pickTask(r *rng, ts []task, total int) task {
	x := r.intn(total)
	for _, t := range ts {
		if x < t.weight {
			return t
		}
		x -= t.weight
	}
	return ts[len(ts)-1]
}

// writeMsg renders one message exactly as the ChatML chat template does:
// "<|im_start|>{role}\n{content}<|im_end|>\n".
func writeMsg(b *strings.Builder, role, content string) {
	b.WriteString("<|im_start|>")
	b.WriteString(role)
	b.WriteString("\n")
	b.WriteString(content)
	b.WriteString("<|im_end|>\n")
}

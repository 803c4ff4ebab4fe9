package main

import (
	"fmt"
	"strconv"
	"strings"
)

// The tool-calling part of the corpus: a catalog of functions in the
// corpus's domains, and conversations in the format of the model's chat
// template (defaultmodel.ChatTemplate, Qwen2.5's tool sections): the
// offered tools as JSON in the system turn, the assistant's call as
// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, the tool's
// result as a user turn of <tool_response>, then the assistant's answer.

// param is one parameter of a tool: its name, its JSON schema type
// ("string" or "integer") and a description that the corpus includes in
// some renderings of the tool.
type param struct{ name, typ, desc string }

// arg is one argument of a call, in the order of the tool's parameters. val
// is a string or an int.
type arg struct {
	key string
	val any
}

// call is one use of a tool: the user's request, the arguments copied from
// it, the tool's result (a JSON object) and the assistant's answer from it.
type call struct {
	user   string
	args   []arg
	result string
	answer string
}

// tool is one function of the catalog.
type tool struct {
	name, desc string
	params     []param
	// covers names the chat tasks whose questions this tool answers: when
	// the tool is not offered, such a question is answered from the model's
	// own knowledge.
	covers []string
	make   func(r *rng) call
}

// jsonString writes s as a JSON string the way Python's json.dumps with
// ensure_ascii=False does (and so muser's tojson filter).
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

// json renders the tool definition as the chat template's tojson does:
// {"type": "function", "function": {"name", "description", "parameters"}},
// separators ", " and ": ". withDesc adds each parameter's description.
func (t *tool) json(withDesc bool) string {
	var b strings.Builder
	b.WriteString(`{"type": "function", "function": {"name": `)
	jsonString(&b, t.name)
	b.WriteString(`, "description": `)
	jsonString(&b, t.desc)
	b.WriteString(`, "parameters": {"type": "object", "properties": {`)
	for i, p := range t.params {
		if i > 0 {
			b.WriteString(", ")
		}
		jsonString(&b, p.name)
		b.WriteString(`: {"type": `)
		jsonString(&b, p.typ)
		if withDesc {
			b.WriteString(`, "description": `)
			jsonString(&b, p.desc)
		}
		b.WriteString("}")
	}
	b.WriteString(`}, "required": [`)
	for i, p := range t.params {
		if i > 0 {
			b.WriteString(", ")
		}
		jsonString(&b, p.name)
	}
	b.WriteString("]}}}")
	return b.String()
}

// argsJSON renders a call's arguments as a JSON object with tojson's
// separators.
func argsJSON(args []arg) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		jsonString(&b, a.key)
		b.WriteString(": ")
		switch v := a.val.(type) {
		case int:
			b.WriteString(strconv.Itoa(v))
		case string:
			jsonString(&b, v)
		default:
			panic(fmt.Sprintf("corpusgen: argument %s has type %T", a.key, v))
		}
	}
	b.WriteByte('}')
	return b.String()
}

// obj renders a flat JSON object from key, value pairs (values string or
// int) with tojson's separators: the tool results.
func obj(kv ...any) string {
	args := make([]arg, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		args = append(args, arg{kv[i].(string), kv[i+1]})
	}
	return argsJSON(args)
}

// callText is the assistant's rendering of one call, as the template
// writes it after "<|im_start|>assistant".
func callText(name string, args []arg) string {
	return "\n<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + argsJSON(args) + "}\n</tool_call>"
}

// Tables used only by the tools.
var (
	weatherCities = []string{"Paris", "Madrid", "Rome", "Berlin", "Tokyo", "London", "Cairo", "Athens",
		"Moscow", "Beijing", "Ottawa", "Nairobi", "Lima", "Oslo", "Lisbon", "Dublin", "Canberra",
		"Stockholm", "Warsaw", "Havana", "New York", "Sydney", "Mumbai", "Toronto", "Vienna", "Prague"}
	skies     = []string{"sunny", "cloudy", "rainy", "windy", "snowy", "foggy"}
	timeZones = []string{"7:00", "8:30", "9:15", "10:00", "11:45", "12:00", "13:30", "14:00", "15:20", "16:45", "18:00", "19:30", "21:00", "22:10"}
	messages  = []string{"I will be late", "I am on my way", "see you at the park", "happy birthday",
		"dinner is ready", "can we play tomorrow", "thank you for the gift", "the cat is home",
		"I love you", "call me back", "I am at school", "good night", "let us meet at noon", "I found your book"}
	songs = []string{"Twinkle Twinkle Little Star", "Happy Birthday", "The Wheels on the Bus", "Old MacDonald",
		"Baa Baa Black Sheep", "Row Row Row Your Boat", "If You Are Happy", "Five Little Ducks"}
	rooms = []string{"kitchen", "bedroom", "bathroom", "living room", "hall", "garden", "garage", "attic"}
	// units are conversions with whole factors: from (plural), to (plural), factor.
	units = []struct {
		from, to string
		factor   int
	}{
		{"kilometres", "metres", 1000}, {"metres", "centimetres", 100}, {"hours", "minutes", 60},
		{"minutes", "seconds", 60}, {"kilograms", "grams", 1000}, {"days", "hours", 24},
		{"weeks", "days", 7}, {"years", "months", 12}, {"litres", "millilitres", 1000},
	}
	storyTopics = []string{"dragon", "princess", "robot", "pirate", "cat", "dog", "bear", "fox",
		"rabbit", "train", "rocket", "castle", "garden", "unicorn", "dinosaur", "owl"}
)

// bareNoun strips a leading article from a noun phrase ("a banana" →
// "banana", "the sky" → "sky").
func bareNoun(np string) string {
	for _, a := range []string{"a ", "an ", "the "} {
		if s, ok := strings.CutPrefix(np, a); ok {
			return s
		}
	}
	return np
}

func arithTool(name, desc, op, task string, max int, f func(a, b int) (int, bool), qs []string) tool {
	return tool{name, desc, []param{{"a", "integer", "The first number."}, {"b", "integer", "The second number."}}, []string{task},
		func(r *rng) call {
			var a, b, c int
			for {
				a, b = r.rangeIn(0, max), r.rangeIn(0, max)
				var ok bool
				if c, ok = f(a, b); ok {
					break
				}
			}
			q := expand(r, pick(r, qs), map[string]string{"a": num(a), "b": num(b)})
			return call{q, []arg{{"a", a}, {"b", b}}, obj("result", c), fmt.Sprintf("%d %s %d is %d.", a, op, b, c)}
		}}
}

// catalog returns the functions of the tool-calling corpus.
func catalog() []tool {
	return []tool{
		arithTool("add", "Add two numbers.", "plus", "add", 50, func(a, b int) (int, bool) { return a + b, true }, addQs),
		arithTool("subtract", "Subtract the second number from the first.", "minus", "sub", 50, func(a, b int) (int, bool) { return a - b, a >= b }, subQs),
		arithTool("multiply", "Multiply two numbers.", "times", "mul", 20, func(a, b int) (int, bool) { return a * b, true }, mulQs),
		{"get_weather", "Get the current weather in a city.", []param{{"city", "string", "The name of the city."}}, nil,
			func(r *rng) call {
				c := pick(r, weatherCities)
				q := expand(r, "[What is the weather in {c}?|What's the weather like in {c}?|How is the weather in {c}?|Tell me the weather in {c}.|Is it sunny in {c}?|What is the weather like in {c} today?|Weather in {c}, please.]", map[string]string{"c": c})
				temp, sky := r.rangeIn(-5, 35), pick(r, skies)
				return call{q, []arg{{"city", c}}, obj("temperature", temp, "sky", sky),
					fmt.Sprintf("It is %d degrees and %s in %s.", temp, sky, c)}
			}},
		{"get_capital", "Get the capital city of a country.", []param{{"country", "string", "The name of the country."}}, []string{"capital"},
			func(r *rng) call {
				c := pick(r, capitals)
				q := expand(r, "[What is the capital of {c}?|What's the capital of {c}?|Which city is the capital of {c}?|Tell me the capital of {c}.|Look up the capital of {c}.]", map[string]string{"c": c.country})
				return call{q, []arg{{"country", c.country}}, obj("capital", c.city), fmt.Sprintf("The capital of %s is %s.", c.country, c.city)}
			}},
		{"spell_word", "Spell a word letter by letter.", []param{{"word", "string", "The word to spell."}}, []string{"spell"},
			func(r *rng) call {
				w := pick(r, spellWords)
				q := expand(r, "[How do you spell {w}?|Spell {w}.|Can you spell {w}?|Please spell the word {w}.|Spell the word {w}.|How do you spell the word {w}?]", map[string]string{"w": w})
				sp := strings.Join(strings.Split(w, ""), "-")
				return call{q, []arg{{"word", w}}, obj("spelling", sp), fmt.Sprintf("The word %s is spelled %s.", w, sp)}
			}},
		{"count_legs", "Count the legs of an animal.", []param{{"animal", "string", "The kind of animal."}}, []string{"legs"},
			func(r *rng) call {
				a := pickAnimal(r, func(a animal) bool { return a.legs >= 0 })
				q := expand(r, "[How many legs does {a} have?|How many legs has {a} got?|Tell me how many legs {a} has.|Count the legs of {a}.]", map[string]string{"a": article(a.name) + " " + a.name})
				ans := fmt.Sprintf("%s %s has %d legs.", capFirst(article(a.name)), a.name, a.legs)
				if a.legs == 0 {
					ans = fmt.Sprintf("%s %s has no legs.", capFirst(article(a.name)), a.name)
				}
				return call{q, []arg{{"animal", a.name}}, obj("legs", a.legs), ans}
			}},
		{"get_colour", "Get the usual colour of a thing.", []param{{"thing", "string", "The thing to describe."}}, []string{"colour"},
			func(r *rng) call {
				t := pick(r, colourThings)
				q := expand(r, "[What colour is {x}?|What color is {x}?|What is the colour of {x}?|Tell me the colour of {x}.]", map[string]string{"x": t.np})
				return call{q, []arg{{"thing", bareNoun(t.np)}}, obj("colour", t.colour), fmt.Sprintf("%s is %s.", capFirst(t.np), t.colour)}
			}},
		{"get_animal_sound", "Get the sound an animal makes.", []param{{"animal", "string", "The kind of animal."}}, []string{"sound"},
			func(r *rng) call {
				a := pickAnimal(r, func(a animal) bool { return a.sound != "" })
				q := expand(r, "[What sound does {a} make?|What does {a} say?|What noise does {a} make?]", map[string]string{"a": article(a.name) + " " + a.name})
				return call{q, []arg{{"animal", a.name}}, obj("sound", a.sound), fmt.Sprintf("%s %s says %s.", capFirst(article(a.name)), a.name, a.sound)}
			}},
		{"get_baby_animal", "Get the name of an animal's baby.", []param{{"animal", "string", "The kind of animal."}}, []string{"baby"},
			func(r *rng) call {
				a := pickAnimal(r, func(a animal) bool { return a.baby != "" })
				q := expand(r, "[What is a baby {x} called?|What do you call a baby {x}?|What is the name for a baby {x}?]", map[string]string{"x": a.name})
				return call{q, []arg{{"animal", a.name}}, obj("baby", a.baby), fmt.Sprintf("A baby %s is called %s %s.", a.name, article(a.baby), a.baby)}
			}},
		{"get_opposite", "Get the opposite of a word.", []param{{"word", "string", "The word."}}, []string{"opposite"},
			func(r *rng) call {
				p := pick(r, opposites)
				a, b := p[0], p[1]
				if r.chance(0.5) {
					a, b = b, a
				}
				q := expand(r, "[What is the opposite of {a}?|What's the opposite of {a}?|Tell me the opposite of {a}.]", map[string]string{"a": a})
				return call{q, []arg{{"word", a}}, obj("opposite", b), fmt.Sprintf("The opposite of %s is %s.", a, b)}
			}},
		{"set_timer", "Set a timer for a number of minutes.", []param{{"minutes", "integer", "How many minutes."}}, nil,
			func(r *rng) call {
				n := r.rangeIn(2, 60)
				q := expand(r, "[Set a timer for {n} minutes.|Can you set a timer for {n} minutes?|Start a timer for {n} minutes.|Please set a {n} minute timer.|Remind me in {n} minutes.|Time {n} minutes for me.]", map[string]string{"n": num(n)})
				return call{q, []arg{{"minutes", n}}, obj("status", "started", "minutes", n), fmt.Sprintf("Your timer for %d minutes has started.", n)}
			}},
		{"convert_units", "Convert a value from one unit to another.", []param{{"value", "integer", "The amount to convert."}, {"from_unit", "string", "The unit of the value."}, {"to_unit", "string", "The unit to convert to."}}, nil,
			func(r *rng) call {
				u := pick(r, units)
				v := r.rangeIn(2, 20)
				q := expand(r, "[Convert {v} {f} to {t}.|How many {t} are in {v} {f}?|What is {v} {f} in {t}?|Change {v} {f} into {t}.|Please convert {v} {f} to {t}.]", map[string]string{"v": num(v), "f": u.from, "t": u.to})
				return call{q, []arg{{"value", v}, {"from_unit", u.from}, {"to_unit", u.to}}, obj("value", v*u.factor, "unit", u.to),
					fmt.Sprintf("%d %s is %d %s.", v, u.from, v*u.factor, u.to)}
			}},
		{"days_until", "Count the days from today until a day of the week.", []param{{"day", "string", "The day of the week."}}, nil,
			func(r *rng) call {
				d := pick(r, days)
				q := expand(r, "[How many days until {d}?|How many days is it until {d}?|How long is it until {d}?|How many days are left until {d}?|Count the days until {d}.]", map[string]string{"d": d})
				n := r.rangeIn(1, 7)
				ans := fmt.Sprintf("There are %d days until %s.", n, d)
				if n == 1 {
					ans = fmt.Sprintf("There is 1 day until %s.", d)
				}
				return call{q, []arg{{"day", d}}, obj("days", n), ans}
			}},
		{"send_message", "Send a text message to a person.", []param{{"to", "string", "The name of the person."}, {"text", "string", "The text of the message."}}, nil,
			func(r *rng) call {
				who := pick(r, append(append([]string{}, girlNames...), boyNames...))
				m := pick(r, messages)
				q := expand(r, "[Send a message to {n} saying {m}.|Text {n} that {m}.|Send {n} a message: {m}.|Tell {n} that {m}.|Please send a message to {n} saying {m}.|Message {n} and say {m}.]", map[string]string{"n": who, "m": m})
				return call{q, []arg{{"to", who}, {"text", m}}, obj("status", "sent"), fmt.Sprintf("I sent your message to %s.", who)}
			}},
		{"call_person", "Start a phone call with a person.", []param{{"name", "string", "The name of the person."}}, nil,
			func(r *rng) call {
				who := pick(r, append(append([]string{}, girlNames...), boyNames...))
				q := expand(r, "[Call {n}.|Please call {n}.|Can you call {n}?|Phone {n} for me.|Ring {n}.]", map[string]string{"n": who})
				return call{q, []arg{{"name", who}}, obj("status", "ringing"), fmt.Sprintf("I am calling %s now.", who)}
			}},
		{"search_stories", "Search the story library for a topic.", []param{{"topic", "string", "What the story is about."}}, []string{"story"},
			func(r *rng) call {
				tp := pick(r, storyTopics)
				q := expand(r, "[Find a story about {a} {t}.|Search for a story about {a} {t}.|Look for stories about {a} {t}.|Do you have a story about {a} {t}?]", map[string]string{"a": article(tp), "t": tp})
				title := fmt.Sprintf("%s the %s", pick(r, petNames), capFirst(tp))
				return call{q, []arg{{"topic", tp}}, obj("title", title), fmt.Sprintf("I found a story called %s.", title)}
			}},
		{"get_time", "Get the current time in a city.", []param{{"city", "string", "The name of the city."}}, nil,
			func(r *rng) call {
				c := pick(r, weatherCities)
				q := expand(r, "[What time is it in {c}?|What is the time in {c}?|Tell me the time in {c}.]", map[string]string{"c": c})
				tm := pick(r, timeZones)
				return call{q, []arg{{"city", c}}, obj("time", tm), fmt.Sprintf("It is %s in %s.", tm, c)}
			}},
		{"play_song", "Play a song.", []param{{"title", "string", "The title of the song."}}, nil,
			func(r *rng) call {
				s := pick(r, songs)
				q := expand(r, "[Play {s}.|Can you play {s}?|Please play {s}.|Put on {s}.|I want to hear {s}.]", map[string]string{"s": s})
				return call{q, []arg{{"title", s}}, obj("status", "playing"), fmt.Sprintf("Now playing %s.", s)}
			}},
		{"turn_on_light", "Turn on the light in a room.", []param{{"room", "string", "The room."}}, nil,
			func(r *rng) call {
				rm := pick(r, rooms)
				q := expand(r, "[Turn on the light in the {r}.|Switch on the {r} light.|Please turn on the {r} light.|Can you turn the light on in the {r}?]", map[string]string{"r": rm})
				return call{q, []arg{{"room", rm}}, obj("light", "on"), fmt.Sprintf("The light in the %s is on.", rm)}
			}},
		{"add_to_list", "Add an item to the shopping list.", []param{{"item", "string", "The item to buy."}, {"quantity", "integer", "How many."}}, nil,
			func(r *rng) call {
				t := pick(r, things)
				n := r.rangeIn(2, 12)
				q := expand(r, "[Add {n} {t} to my shopping list.|Put {n} {t} on the shopping list.|Please add {n} {t} to the list.|I need {n} {t}, add them to my list.]", map[string]string{"n": num(n), "t": t[1]})
				return call{q, []arg{{"item", t[1]}, {"quantity", n}}, obj("status", "added"), fmt.Sprintf("I added %d %s to your shopping list.", n, t[1])}
			}},
	}
}

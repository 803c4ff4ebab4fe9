package main

import "strings"

// character is a person or animal in a story.
type character struct {
	name   string // "Lily"
	kind   string // "girl", "dog"
	adj    string // "little"
	female bool
}

var (
	girlNames = []string{"Lily", "Mia", "Anna", "Sara", "Lucy", "Emma", "Zoe", "Ella", "Amy",
		"Rosa", "Nina", "Kate", "Jane", "Sue", "Ruby", "Daisy", "Molly", "Grace", "Hana", "Tara"}
	boyNames = []string{"Tom", "Ben", "Sam", "Max", "Leo", "Jack", "Tim", "Joe", "Dan", "Finn",
		"Noah", "Jake", "Luke", "Pete", "Ravi", "Omar", "Kai", "Eli", "Ned", "Bob"}
	petNames = []string{"Pip", "Rex", "Milo", "Dot", "Rusty", "Coco", "Bella", "Buddy", "Luna",
		"Fluffy", "Spot", "Sunny", "Bubbles", "Ziggy", "Honey", "Pebble", "Toby", "Mimi"}
	peopleAdjs = []string{"little", "kind", "happy", "curious", "brave", "shy", "small",
		"young", "cheerful", "clever", "gentle", "funny"}
	animalKinds = []string{"cat", "dog", "bunny", "bear", "bird", "mouse", "duck", "fox",
		"frog", "puppy", "kitten", "squirrel", "owl", "pig", "lamb", "turtle"}
	animalAdjs = []string{"little", "fluffy", "small", "brown", "white", "furry", "tiny",
		"big", "happy", "soft", "playful", "sleepy"}
	places = []string{"the park", "the forest", "the garden", "the beach", "the farm",
		"the lake", "the zoo", "the big hill", "the market", "the woods", "the playground",
		"the river", "the meadow", "the library"}
	objects = []string{"red ball", "blue kite", "toy car", "teddy bear", "yellow hat",
		"shiny stone", "little boat", "picture book", "green balloon", "toy train", "doll",
		"soft blanket", "jump rope", "pink bike", "orange bucket", "silver bell", "wooden spoon",
		"purple crayon"}
	parents  = []string{"mom", "dad", "grandma", "grandpa"}
	feelings = []string{"happy", "excited", "proud", "glad", "cheerful"}
)

// fear is something a story's hero is afraid of, and the brave act that
// overcomes it.
type fear struct{ what, act string }

var fears = []fear{
	{"the dark", "{He} turned off the light and looked around {his} room."},
	{"the big waves", "{He} walked into the water and let a small wave touch {his} feet."},
	{"the loud thunder", "{He} sat by the window and counted the flashes of light."},
	{"the tall slide", "{He} climbed to the top and went down the slide."},
	{"the big dog next door", "{He} held out {his} hand, and the dog licked it."},
	{"deep water", "{He} held on to {his} {parent} and swam a little."},
	{"the old tree", "{He} walked up to the tree and touched its rough bark."},
	{"riding a bike", "{He} got on the bike and rode to the end of the street."},
}

// project is something a hero makes, how it fails, and what it is called
// when done.
type project struct{ goal, fail, thing string }

var projects = []project{
	{"build a tall tower of blocks", "the tower fell down with a loud crash", "tower"},
	{"bake a cake", "{he} dropped the eggs on the floor", "cake"},
	{"draw a picture of {his} family", "{he} spilled the paint all over it", "picture"},
	{"make a paper boat", "the boat sank in the water", "boat"},
	{"build a sand castle", "a big wave came and washed it away", "castle"},
	{"plant a little garden", "the birds ate all the seeds", "garden"},
	{"make a card for {his} {parent}", "{he} tore the paper", "card"},
}

// finding is a creature in need that a hero finds.
type finding struct{ what, creature, help, end string }

var findings = []finding{
	{"a little bird with a hurt wing", "bird", "{He} made a soft bed for it in a box.", "The bird got better and flew up into the sky."},
	{"a lost puppy", "puppy", "{He} read the name on its collar and took it home to its family.", "The puppy wagged its tail and licked {his} face."},
	{"a baby duck all alone", "duck", "{He} carried it gently back to the pond.", "The baby duck swam to its mother."},
	{"a kitten stuck in a tree", "kitten", "{He} called {his} {parent}, who brought a ladder.", "The kitten purred and rubbed against {his} legs."},
	{"a tiny turtle on the path", "turtle", "{He} picked it up and put it by the water.", "The turtle slowly swam away."},
	{"a hungry squirrel", "squirrel", "{He} gave it some nuts from {his} bag.", "The squirrel ate the nuts and ran up a tree."},
}

// storySpec lets a chat request steer a story: a kind of hero and an object.
type storySpec struct {
	heroKind string // "" for any
	heroName string // "" for any
	object   string // "" for any
}

func newPerson(r *rng) character {
	if r.chance(0.5) {
		return character{name: pick(r, girlNames), kind: "girl", adj: pick(r, peopleAdjs), female: true}
	}
	return character{name: pick(r, boyNames), kind: "boy", adj: pick(r, peopleAdjs)}
}

func newAnimal(r *rng, kind string) character {
	if kind == "" {
		kind = pick(r, animalKinds)
	}
	return character{name: pick(r, petNames), kind: kind, adj: pick(r, animalAdjs), female: r.chance(0.5)}
}

func newCharacter(r *rng, kind string) character {
	switch {
	case kind == "girl" || kind == "boy":
		c := newPerson(r)
		for c.kind != kind {
			c = newPerson(r)
		}
		return c
	case kind != "":
		return newAnimal(r, kind)
	case r.chance(0.6):
		return newPerson(r)
	}
	return newAnimal(r, "")
}

// bind adds a character's variables under prefix p ("" for the hero, "f" for
// the friend): name, kind, adj, he/He, his/His, him, and "a_adj" (the
// adjective with its article).
func bind(vars map[string]string, p string, c character) {
	he, his, him := "he", "his", "him"
	if c.female {
		he, his, him = "she", "her", "her"
	}
	vars[p+"name"] = c.name
	vars[p+"kind"] = c.kind
	vars[p+"adj"] = c.adj
	vars[p+"a_adj"] = article(c.adj) + " " + c.adj
	vars[p+"he"] = he
	vars[p+"He"] = capFirst(he)
	vars[p+"his"] = his
	vars[p+"His"] = capFirst(his)
	vars[p+"him"] = him
}

// story returns one short story.
func story(r *rng, spec storySpec) string {
	hero := newCharacter(r, spec.heroKind)
	if spec.heroName != "" {
		hero.name = spec.heroName
	}
	friend := newCharacter(r, "")
	for friend.name == hero.name {
		friend = newCharacter(r, "")
	}
	obj := spec.object
	if obj == "" {
		obj = pick(r, objects)
	}
	words := strings.Fields(obj)
	vars := map[string]string{
		"obj":    obj,
		"a_obj":  article(obj) + " " + obj,
		"objn":   words[len(words)-1],
		"place":  pick(r, places),
		"parent": pick(r, parents),
		"feel":   pick(r, feelings),
		"age":    []string{"four", "five", "six", "seven", "eight"}[r.intn(5)],
	}
	vars["Parent"] = capFirst(vars["parent"])
	bind(vars, "", hero)
	bind(vars, "f", friend)

	var sents []string
	add := func(ts ...string) {
		for _, t := range ts {
			s := expand(r, t, vars)
			if s != "" {
				sents = append(sents, s)
			}
		}
	}
	add(intro(r))
	plots := []func(*rng, map[string]string, func(...string)){
		plotLost, plotShare, plotFear, plotFind, plotRain, plotTryAgain, plotBirthday, plotNewFriend,
	}
	pick(r, plots)(r, vars, add)
	if r.chance(0.25) {
		add("The end.")
	}
	return paragraphs(r, sents)
}

func intro(r *rng) string {
	return pick(r, []string{
		"Once upon a time, there was {a_adj} {kind} named {name}.",
		"Once upon a time, in a small [town|village|house by the sea], there lived {a_adj} {kind} called {name}.",
		"There was once {a_adj} {kind} named {name}.",
		"{name} was {a_adj} {kind} who loved to [play outside|run and jump|sing songs|laugh|explore].",
		"One [sunny|bright|cold|warm|windy] [day|morning], {a_adj} {kind} named {name} [woke up early|went outside|was playing in the yard].",
		"[Long ago|Once], {a_adj} {kind} named {name} lived [near a big forest|in a little house|on a farm|by a quiet lake].",
	})
}

func plotLost(r *rng, v map[string]string, add func(...string)) {
	add("{name} had {a_obj}. [{He} loved it very much.|It was {his} favorite toy.|{He} took it everywhere.]",
		"One day, {name} took the {objn} to {place}.",
		"{He} played with it [all morning|for a long time|under a big tree|with a happy smile].",
		"[Then|But then|Suddenly], {name} could not find the {objn}.",
		"{name} [felt|was] [very sad|so sad|sad and worried]. [{He} started to cry.|{He} looked everywhere.|]",
		"{fname}, {fa_adj} {fkind}, [came by|saw {him}|walked over]. \"Why are you sad, {name}?\" [{fhe} asked|asked {fname}].",
		"\"I lost my {objn},\" said {name}.",
		"\"Do not worry. I will help you [find it|look for it],\" said {fname}.",
		"They looked [under the bushes|behind a big rock|in the tall grass|near the pond|under a bench].",
		"[At last|Soon|After a while], {fname} [found|saw] the {objn}[ under a leaf| next to a tree| in the grass|]!",
		"{name} was so happy. \"Thank you, {fname}!\" {he} said.",
		"[From that day on, {name} and {fname} were best friends.|They played together until the sun went down.|{name} learned that friends help each other.]")
}

func plotShare(r *rng, v map[string]string, add func(...string)) {
	add("{name} had a new {obj}. [It was very pretty.|{He} was so {feel}.|]",
		"{fname} [came to play|saw it] and said, \"Can I play with your {objn} too?\"",
		"At first, {name} did not want to share. \"It is mine,\" {he} said.",
		"{fname} felt sad and [walked away|sat down alone|looked at the ground].",
		"{name} [thought about it|saw the sad face of {fname}][ and felt bad|].",
		"Then {he} said, \"[You can play with it too.|Let us play together.|Here, you can have a turn.]\"",
		"{fname} smiled[ a big smile|]. They played with the {objn} [together|all day|until it was time to go home].",
		"[Sharing made them both happy.|{name} learned that sharing is fun.|It was more fun to play together.]")
}

func plotFear(r *rng, v map[string]string, add func(...string)) {
	f := pick(r, fears)
	v["fear"] = f.what
	add("{name} was scared of {fear}.",
		"[Every time|Every day], {he} [hid behind {his} {parent}|held {his} {parent}'s hand|ran away].",
		"One day, {his} {parent} said, \"[Do not be scared.|There is nothing to fear.|You can be brave.] I am here with you.\"",
		"{name} took a deep breath. [{He} was still a little scared, but {he} tried.|{He} wanted to be brave.]",
		f.act,
		"It was not so bad! [It was fun!|{He} even laughed.|{He} smiled.]",
		"{name} felt [proud|brave and happy|very {feel}]. [{He} was not scared anymore.|Now {he} is not afraid of {fear}.]")
}

func plotFind(r *rng, v map[string]string, add func(...string)) {
	f := pick(r, findings)
	v["find"] = f.what
	v["creature"] = f.creature
	add("One [morning|day|afternoon], {name} went to {place}.",
		"[There|Near a tree|By the path], {he} [saw|found] {find}.",
		"[The {creature} looked sad.|The poor {creature} was scared.|The {creature} needed help.]",
		"{name} wanted to help. [\"Do not be afraid,\" {he} said softly.|]",
		f.help,
		f.end,
		"{name} [smiled|waved goodbye]. {He} was {feel} that {he} could help.")
}

func plotRain(r *rng, v map[string]string, add func(...string)) {
	add("It was a [sunny|warm|bright] day. {name} and {fname} went to {place} to play.",
		"They [played with {a_obj}|ran and jumped|built a little house of sticks|picked flowers].",
		"Then the sky turned [grey|dark]. [Big drops of rain began to fall.|It started to rain.]",
		"\"Oh no!\" said {fname}. \"[We will get wet!|Let us go home!]\"",
		"They ran [home|under a big tree|inside]. [{name}'s {parent}|{Parent}] gave them [warm milk|hot soup|cookies and milk].",
		"[When the rain stopped|After the rain], they saw a [big|beautiful] rainbow[ in the sky|].",
		"\"[Look|Wow], a rainbow!\" said {name}. [It was the best day ever.|They were very happy.]")
}

func plotTryAgain(r *rng, v map[string]string, add func(...string)) {
	p := pick(r, projects)
	v["goal"] = expand(r, p.goal, v)
	v["fail"] = expand(r, p.fail, v)
	v["thing"] = p.thing
	add("{name} wanted to {goal}.",
		"{He} worked [hard|for a long time|all afternoon]. But {fail}.",
		"{name} [felt sad|was upset|wanted to give up].",
		"[{His} {parent}|{fname}] said, \"[Try again.|Do not give up.] [You can do it!|I will help you.]\"",
		"So {name} tried again. [This time {he} was more careful.|{He} worked slowly and carefully.]",
		"[At last|In the end], the {thing} was [done|ready|beautiful]! {name} was [so proud|very happy].",
		"[{He} learned to never give up.|{He} showed it to everyone.|It was the best {thing} ever.]")
}

func plotBirthday(r *rng, v map[string]string, add func(...string)) {
	add("Today was {name}'s birthday. {He} was {age} years old.",
		"{His} friends came to {his} house[ for a party|].",
		"They [ate cake|sang songs|played games][ and laughed a lot|].",
		"{fname} gave {name} a [box with a bow|small present]. Inside was {a_obj}!",
		"\"Thank you!\" said {name}. \"[I love it!|It is the best gift ever!]\"",
		"That night, {name} went to bed [with a big smile|happy and tired].")
}

func plotNewFriend(r *rng, v map[string]string, add func(...string)) {
	add("One day, {name} went to {place}. {He} [felt a little lonely|wanted someone to play with].",
		"There, {he} met {fa_adj} {fkind}.",
		"\"Hello! What is your name?\" asked {name}.",
		"\"My name is {fname},\" said the {fkind}. \"What is your name?\"",
		"\"I am {name},\" said {name}. \"Do you want to play with me?\"",
		"\"Yes, I would love to!\" said {fname}.",
		"They [played with {a_obj}|ran in the sun|played hide and seek] [all day|until dinner time].",
		"[{name} was not lonely anymore.|Now {name} had a new friend.|They became the best of friends.]")
}

// paragraphs joins sentences into one to three paragraphs.
func paragraphs(r *rng, sents []string) string {
	n := 1 + r.intn(3)
	if n > len(sents) {
		n = len(sents)
	}
	var b strings.Builder
	per := (len(sents) + n - 1) / n
	for i, s := range sents {
		if i > 0 {
			if i%per == 0 {
				b.WriteString("\n\n")
			} else {
				b.WriteString(" ")
			}
		}
		b.WriteString(capFirst(s))
	}
	return b.String()
}

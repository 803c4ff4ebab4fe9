package main

// The fixed tables of facts the chat corpus teaches. The held-out questions
// of package evalset ask about entries of these tables.

type capital struct{ country, city string }

var capitals = []capital{
	{"France", "Paris"}, {"Spain", "Madrid"}, {"Italy", "Rome"}, {"Germany", "Berlin"},
	{"Japan", "Tokyo"}, {"England", "London"}, {"Egypt", "Cairo"}, {"Greece", "Athens"},
	{"Russia", "Moscow"}, {"China", "Beijing"}, {"Canada", "Ottawa"}, {"Kenya", "Nairobi"},
	{"Peru", "Lima"}, {"Norway", "Oslo"}, {"Portugal", "Lisbon"}, {"Ireland", "Dublin"},
	{"Australia", "Canberra"}, {"Sweden", "Stockholm"}, {"Poland", "Warsaw"}, {"Cuba", "Havana"},
}

var days = []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

var months = []string{"January", "February", "March", "April", "May", "June", "July",
	"August", "September", "October", "November", "December"}

// colourThing is a thing with its usual colour. np is the noun phrase as it
// appears inside a sentence ("the sky", "grass", "a banana").
type colourThing struct{ np, colour string }

var colourThings = []colourThing{
	{"the sky", "blue"}, {"grass", "green"}, {"snow", "white"}, {"a banana", "yellow"},
	{"the sun", "yellow"}, {"a strawberry", "red"}, {"coal", "black"}, {"a carrot", "orange"},
	{"a tomato", "red"}, {"a leaf", "green"}, {"milk", "white"}, {"a lemon", "yellow"},
	{"a cherry", "red"}, {"a frog", "green"}, {"chocolate", "brown"}, {"a pumpkin", "orange"},
	{"a crow", "black"}, {"a polar bear", "white"}, {"an elephant", "grey"}, {"the sea", "blue"},
	{"a cloud", "white"}, {"a fire truck", "red"}, {"a pig", "pink"}, {"a flamingo", "pink"},
	{"a plum", "purple"}, {"a lime", "green"}, {"a tree trunk", "brown"}, {"an orange", "orange"},
}

// animal is an animal with the facts the corpus teaches about it. legs < 0
// means the corpus says nothing about its legs; sound or baby "" likewise.
type animal struct {
	name, plural string
	sound        string
	legs         int
	baby         string
}

var animals = []animal{
	{"cow", "cows", "moo", 4, "calf"},
	{"dog", "dogs", "woof", 4, "puppy"},
	{"cat", "cats", "meow", 4, "kitten"},
	{"duck", "ducks", "quack", 2, "duckling"},
	{"sheep", "sheep", "baa", 4, "lamb"},
	{"pig", "pigs", "oink", 4, "piglet"},
	{"lion", "lions", "roar", 4, "cub"},
	{"horse", "horses", "neigh", 4, "foal"},
	{"owl", "owls", "hoot", 2, "owlet"},
	{"frog", "frogs", "ribbit", 4, "tadpole"},
	{"bee", "bees", "buzz", 6, ""},
	{"mouse", "mice", "squeak", 4, ""},
	{"hen", "hens", "cluck", 2, "chick"},
	{"snake", "snakes", "hiss", 0, ""},
	{"wolf", "wolves", "howl", 4, "pup"},
	{"donkey", "donkeys", "hee-haw", 4, "foal"},
	{"spider", "spiders", "", 8, ""},
	{"ant", "ants", "", 6, ""},
	{"beetle", "beetles", "", 6, ""},
	{"butterfly", "butterflies", "", 6, "caterpillar"},
	{"bird", "birds", "tweet", 2, "chick"},
	{"chicken", "chickens", "cluck", 2, "chick"},
	{"elephant", "elephants", "", 4, "calf"},
	{"crab", "crabs", "", 10, ""},
	{"fish", "fish", "", 0, ""},
	{"bear", "bears", "growl", 4, "cub"},
	{"goat", "goats", "maa", 4, "kid"},
}

var opposites = [][2]string{
	{"hot", "cold"}, {"big", "small"}, {"up", "down"}, {"happy", "sad"}, {"day", "night"},
	{"fast", "slow"}, {"wet", "dry"}, {"open", "closed"}, {"tall", "short"}, {"light", "dark"},
	{"old", "young"}, {"full", "empty"}, {"loud", "quiet"}, {"hard", "soft"}, {"good", "bad"},
	{"in", "out"}, {"left", "right"}, {"black", "white"}, {"start", "end"}, {"near", "far"},
}

// spellWords are the words the corpus spells letter by letter.
var spellWords = []string{
	"cat", "dog", "sun", "hat", "ball", "tree", "fish", "bird", "book", "cake", "milk",
	"house", "apple", "happy", "green", "water", "horse", "mouse", "rain", "star", "moon",
	"frog", "duck", "cow", "pig", "red", "blue", "car", "bus", "box", "toy", "bed", "cup",
	"egg", "hand", "door", "girl", "boy", "play", "jump", "run", "school", "garden",
	"flower", "kite", "bear", "lion", "tiger", "snow", "boat", "train", "chair", "table",
	"friend", "smile", "bread", "honey", "sheep", "goat", "zebra", "bike", "pen", "shoe",
	"sock", "nest", "leaf", "rose", "lamp", "clock", "yellow", "orange", "purple", "black",
	"white", "music", "sing", "dance", "park", "beach", "river", "cloud", "light", "night",
	"morning", "family", "mother", "father", "sister", "brother", "baby", "window", "pencil",
}

// things are countable objects for word problems: singular and plural.
var things = [][2]string{
	{"apple", "apples"}, {"cookie", "cookies"}, {"ball", "balls"}, {"book", "books"},
	{"car", "cars"}, {"flower", "flowers"}, {"sweet", "sweets"}, {"pencil", "pencils"},
	{"sticker", "stickers"}, {"egg", "eggs"}, {"shell", "shells"}, {"marble", "marbles"},
}

// unknownQuestions are questions the model is taught to decline.
var unknownQuestions = []string{
	"What is the meaning of life?", "Can you drive a car?", "What is the weather today?",
	"Who will win the game tonight?", "What time is it?", "How far away is the moon?",
	"What is quantum physics?", "Write me a computer program.", "What is the price of gold?",
	"Who is the president?", "Can you see me?", "What is the biggest number?",
	"Why is the sky so big?", "What will happen tomorrow?", "Can you read my mind?",
	"How do airplanes fly?", "What is my name?", "Where do I live?", "How old am I?",
	"What is the best phone to buy?", "Can you book a flight for me?", "What is love?",
	"Explain how computers work.", "What is the square root of two?", "Who invented the internet?",
	"What did I eat for breakfast?", "How do I fix my car?", "What is the speed of light?",
}

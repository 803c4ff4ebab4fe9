// Command paritytool is the Go side of muser's parity checks against
// llama.cpp (scripts/parity/parity.sh drives it; README.md there explains
// the whole procedure).
//
//	paritytool gen -dir DIR [-shapes a,b] [-quants F16,Q8_0,Q4_K,Q4_K_M] [-seed N]
//	    writes random-weight models with published shapes (enginetest)
//	paritytool tokens -model FILE -n N -out TOKENS.json
//	    writes the teacher-forcing token sequence for a model
//	paritytool compare -model FILE -tokens TOKENS.json -ref REF.bin [-threads N] [-label NAME]
//	    runs muser over the tokens and compares with llama.cpp's
//	    log-probabilities (scripts/parity/logits.mjs); prints one JSON line
//	paritytool report -in RESULTS.jsonl -doc FILE
//	    rewrites the results table in FILE between marker lines
//	paritytool refvs -a A.bin -b B.bin -tokens TOKENS.json [-label NAME]
//	    compares two llama.cpp log-probability files (say, two batchings
//	    or two CPU builds) with the figures of compare, a taking muser's place
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/sample"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: paritytool gen|tokens|compare|report|fixture|benchreport|zero|refvs [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(os.Args[2:])
	case "tokens":
		err = tokens(os.Args[2:])
	case "compare":
		err = compare(os.Args[2:])
	case "report":
		err = report(os.Args[2:])
	case "fixture":
		err = fixture(os.Args[2:])
	case "benchreport":
		err = benchReport(os.Args[2:])
	case "zero":
		err = zero(os.Args[2:])
	case "refvs":
		err = refvs(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paritytool:", err)
		os.Exit(1)
	}
}

var shapes = map[string]enginetest.Shape{
	enginetest.Llama32_1B.Name: enginetest.Llama32_1B,
	enginetest.Qwen25_05B.Name: enginetest.Qwen25_05B,
	enginetest.Qwen3_06B.Name:  enginetest.Qwen3_06B,
	// Small models for quick investigations (not in the report).
	"tiny-llama":  enginetest.Tiny("llama"),
	"tiny-qwen2":  enginetest.Tiny("qwen2"),
	"tiny-qwen3":  enginetest.Tiny("qwen3"),
	"tiny0-llama": withLayers(enginetest.Tiny("llama"), 0),
	"tiny1-llama": withLayers(enginetest.Tiny("llama"), 1),
	"tiny1f-llama": func() enginetest.Shape {
		s := withLayers(enginetest.Tiny("llama"), 1)
		s.FFN, s.Name = 256, s.Name+"-ffn256"
		return s
	}(),
}

// withLayers returns s with n layers, for per-layer investigations.
func withLayers(s enginetest.Shape, n int) enginetest.Shape {
	s.Layers = n
	s.Name = fmt.Sprintf("%s-%dl", s.Name, n)
	return s
}

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	dir := fs.String("dir", "", "output directory")
	only := fs.String("shapes", "llama-3.2-1b,qwen2.5-0.5b,qwen3-0.6b", "shapes to write")
	quants := fs.String("quants", "F16,Q8_0,Q4_K", "weight types, or Q4_K_M for llama.cpp's mix")
	seed := fs.Uint64("seed", 1, "weight seed")
	fs.Parse(args)
	if *dir == "" {
		return fmt.Errorf("gen: -dir is required")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	for _, name := range strings.Split(*only, ",") {
		s, ok := shapes[name]
		if !ok {
			return fmt.Errorf("gen: unknown shape %q", name)
		}
		for _, qn := range strings.Split(*quants, ",") {
			q, err := enginetest.ParseMix(qn)
			if err != nil {
				return err
			}
			path := filepath.Join(*dir, fmt.Sprintf("%s-%s-seed%d.gguf", name, q.Name, *seed))
			if _, err := os.Stat(path); err == nil {
				fmt.Println("exists", path)
				continue
			}
			t0 := time.Now()
			if err := enginetest.WriteMixFile(path, s, q, *seed); err != nil {
				return err
			}
			fmt.Printf("wrote %s (%d params) in %v\n", path, s.Params(), time.Since(t0).Round(time.Millisecond))
		}
	}
	return nil
}

// tokens writes the teacher-forcing sequence: BOS then, for a model with
// a real vocabulary (stories260K), text sampled from the model itself at
// temperature 0.8 (seed 1), so positions see natural context; for random
// models, uniformly random non-control ids (seed 1).
func tokens(args []string) error {
	fs := flag.NewFlagSet("tokens", flag.ExitOnError)
	model := fs.String("model", "", "GGUF model")
	n := fs.Int("n", 512, "tokens")
	out := fs.String("out", "", "output JSON file")
	sampled := fs.Bool("sampled", false, "sample the sequence from the model instead of drawing random ids")
	fs.Parse(args)
	m, err := engine.Open(*model, engine.Options{Device: cpu.New(cpu.Options{})})
	if err != nil {
		return err
	}
	defer m.Close()
	V := m.Config().Vocab
	toks := []int32{1}
	if *sampled {
		s, err := sample.New(sample.Params{Temperature: 0.8, Seed: 1}, V)
		if err != nil {
			return err
		}
		seq, err := m.NewSequence(*n + 1)
		if err != nil {
			return err
		}
		st := []engine.Step{{Seq: seq, Tokens: toks, Output: engine.OutputLast}}
		for len(toks) < *n {
			if err := m.Forward(context.Background(), st); err != nil {
				return err
			}
			t, err := s.Sample(st[0].Logits)
			if err != nil {
				return err
			}
			toks = append(toks, t)
			st[0].Tokens = []int32{t}
		}
	} else {
		r := rand.New(rand.NewPCG(1, uint64(V)))
		for len(toks) < *n {
			toks = append(toks, int32(3+r.IntN(V-3)))
		}
	}
	b, _ := json.Marshal(toks)
	return os.WriteFile(*out, b, 0o644)
}

// Result is one model's parity figures.
type Result struct {
	Model       string    `json:"model"`
	Positions   int       `json:"positions"`
	Vocab       int       `json:"vocab"`
	perPos      []float64 // each position's relative logit error (-dump)
	Agree       int       `json:"agree"`
	AgreePct    float64   `json:"agree_pct"`
	RelErrMean  float64   `json:"rel_logit_err_mean"`
	RelErrMax   float64   `json:"rel_logit_err_max"`
	MarginMin   float64   `json:"ref_top1_margin_min"`
	MarginMed   float64   `json:"ref_top1_margin_median"`
	DisagreeMgn []float64 `json:"disagree_ref_margins,omitempty"`
	LogitStd    float64   `json:"ref_logit_std_mean"`
	// ContextChanges counts positions whose top-1 differs from the top-1
	// of the same token with no context; SelfTop1 those whose top-1 is
	// the input token itself (both from muser's logits).
	ContextChanges int `json:"context_changes_top1"`
	SelfTop1       int `json:"self_top1"`
	Threads        int `json:"threads"`
	// ExactPositions, when non-zero, is how many positions were also
	// compared with enginetest.Reference (float64, exact arithmetic).
	ExactPositions int     `json:"exact_positions,omitempty"`
	MuserVsExact   float64 `json:"muser_vs_exact_rel_err,omitempty"`
	LlamaVsExact   float64 `json:"llamacpp_vs_exact_rel_err,omitempty"`
	Seconds        float64 `json:"muser_seconds"`
	// SelfCompare marks a refvs row: llama.cpp against llama.cpp, with
	// no muser run (no context figure, no timing).
	SelfCompare bool `json:"llamacpp_vs_llamacpp,omitempty"`
}

func readTokens(path string) ([]int32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t []int32
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func compare(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	model := fs.String("model", "", "GGUF model")
	tokPath := fs.String("tokens", "", "tokens JSON")
	refPath := fs.String("ref", "", "llama.cpp log-probabilities (logits.mjs output)")
	threads := fs.Int("threads", 2, "threads")
	dump := fs.String("dump", "", "write each position's relative logit error to this file, one a line")
	label := fs.String("label", "", "name of the row (default: the model file's name)")
	exact := fs.Int("exact", 0, "also compare the first N positions of both with the float64 reference (small models only: it holds all weights as float64)")
	fs.Parse(args)
	toks, err := readTokens(*tokPath)
	if err != nil {
		return err
	}
	m, err := engine.Open(*model, engine.Options{Device: cpu.New(cpu.Options{Threads: *threads})})
	if err != nil {
		return err
	}
	defer m.Close()
	V := m.Config().Vocab
	ref, err := os.ReadFile(*refPath)
	if err != nil {
		return err
	}
	if len(ref) != len(toks)*V*4 {
		return fmt.Errorf("%s: %d bytes, want %d positions × %d tokens × 4", *refPath, len(ref), len(toks), V)
	}
	seq, err := m.NewSequence(len(toks))
	if err != nil {
		return err
	}
	t0 := time.Now()
	st := []engine.Step{{Seq: seq, Tokens: toks, Output: engine.OutputAll}}
	if err := m.Forward(context.Background(), st); err != nil {
		return err
	}
	res := Compare(st[0].Logits, ref, len(toks), V)
	if *dump != "" {
		var sb strings.Builder
		for _, e := range res.perPos {
			fmt.Fprintf(&sb, "%.3e\n", e)
		}
		if err := os.WriteFile(*dump, []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	// Context dependence: the top-1 of each token seen alone (a batch of
	// one-token sequences) against its top-1 in context.
	alone := make([]engine.Step, len(toks))
	for i := range toks {
		s, err := m.NewSequence(1)
		if err != nil {
			return err
		}
		alone[i] = engine.Step{Seq: s, Tokens: toks[i : i+1], Output: engine.OutputLast}
	}
	if err := m.Forward(context.Background(), alone); err != nil {
		return err
	}
	for i := range toks {
		ctxTop := argmax(st[0].Logits[i*V : (i+1)*V])
		if argmax(alone[i].Logits) != ctxTop {
			res.ContextChanges++
		}
		if ctxTop == toks[i] {
			res.SelfTop1++
		}
		alone[i].Logits = nil
	}
	res.Model, res.Threads, res.Seconds = filepath.Base(*model), *threads, time.Since(t0).Seconds()
	if *label != "" {
		res.Model = *label
	}
	if *exact > 0 {
		n := min(*exact, len(toks))
		exactRef, err := enginetest.Reference(m.File(), toks[:n])
		if err != nil {
			return err
		}
		res.ExactPositions = n
		res.MuserVsExact = refErr(exactRef, func(p, i int) float64 { return float64(st[0].Logits[p*V+i]) }, V)
		res.LlamaVsExact = refErr(exactRef, func(p, i int) float64 {
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(ref[(p*V+i)*4:])))
		}, V)
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// Compare computes the parity figures of muser's logits against
// llama.cpp's log-probabilities ref (little-endian float32, -Inf where
// llama.cpp's probability underflowed), n positions of V tokens.
//
// Agreement counts positions whose argmax is the same. The relative logit
// error of a position is ‖a − b‖ / ‖b‖ over the tokens whose reference
// probability is at least 1e-30, after centring a (muser's logits) and b
// (llama.cpp's log-probabilities) on their means over those tokens, which
// removes the per-position constant by which they may differ.
func Compare(logits []float32, ref []byte, n, V int) Result {
	res := Result{Positions: n, Vocab: V}
	var margins []float64
	b := make([]float64, V)
	for p := 0; p < n; p++ {
		a := logits[p*V : (p+1)*V]
		for i := range b {
			b[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(ref[(p*V+i)*4:])))
		}
		am, bm := 0, 0
		for i := range b {
			if a[i] > a[am] {
				am = i
			}
			if b[i] > b[bm] {
				bm = i
			}
		}
		second := math.Inf(-1)
		for i, v := range b {
			if i != bm && v > second {
				second = v
			}
		}
		margin := b[bm] - second
		margins = append(margins, margin)
		if am == bm {
			res.Agree++
		} else {
			res.DisagreeMgn = append(res.DisagreeMgn, margin)
		}
		const floor = -69.0 // ln(1e-30)
		var sa, sb float64
		cnt := 0
		for i, v := range b {
			if v >= floor {
				sa += float64(a[i])
				sb += v
				cnt++
			}
		}
		ma, mb := sa/float64(cnt), sb/float64(cnt)
		var num, den float64
		for i, v := range b {
			if v >= floor {
				d := (float64(a[i]) - ma) - (v - mb)
				num += d * d
				den += (v - mb) * (v - mb)
			}
		}
		rel := math.Sqrt(num / den)
		res.perPos = append(res.perPos, rel)
		res.RelErrMean += rel / float64(n)
		res.RelErrMax = max(res.RelErrMax, rel)
		res.LogitStd += math.Sqrt(den/float64(cnt)) / float64(n)
	}
	res.AgreePct = 100 * float64(res.Agree) / float64(n)
	sort.Float64s(margins)
	res.MarginMin, res.MarginMed = margins[0], margins[len(margins)/2]
	return res
}

// markers returns the lines between which the doc holds table mark.
func markers(mark string) (begin, end string) {
	script := "parity.sh"
	if mark == "selfparity" {
		script = "selfparity.sh"
	}
	return "<!-- " + mark + ":begin (scripts/parity/" + script + " rewrites this table) -->", "<!-- " + mark + ":end -->"
}

func report(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	in := fs.String("in", "", "results JSON lines")
	doc := fs.String("doc", "", "markdown file with the marker lines")
	mark := fs.String("mark", "parity", "name in the marker lines")
	fs.Parse(args)
	beginMark, endMark := markers(*mark)
	data, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	var rows []Result
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("%s: %w", *in, err)
		}
		rows = append(rows, r)
	}
	var t strings.Builder
	t.WriteString(beginMark + "\n")
	t.WriteString("| model | positions | top-1 agreement | rel. logit error mean / max | ref top-1 margin min / median | ref logit std | context changes top-1 |\n")
	t.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		ctx := fmt.Sprintf("%.0f%%", 100*float64(r.ContextChanges)/float64(r.Positions))
		if r.SelfCompare {
			ctx = "—"
		}
		fmt.Fprintf(&t, "| %s | %d | %.2f%% (%d/%d) | %.2e / %.2e | %.3f / %.3f | %.2f | %s |\n",
			r.Model, r.Positions, r.AgreePct, r.Agree, r.Positions, r.RelErrMean, r.RelErrMax, r.MarginMin, r.MarginMed, r.LogitStd, ctx)
	}
	for _, r := range rows {
		if len(r.DisagreeMgn) > 0 {
			ms := slices.Clone(r.DisagreeMgn)
			sort.Float64s(ms)
			fmt.Fprintf(&t, "\n%s: the %d disagreeing positions had reference top-1 margins %v.\n", r.Model, len(ms), fmtFloats(ms))
		}
	}
	t.WriteString(endMark)
	old, err := os.ReadFile(*doc)
	if err != nil {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		return fmt.Errorf("%s: marker lines %q and %q not found", *doc, beginMark, endMark)
	}
	s = s[:i] + t.String() + s[j+len(endMark):]
	return os.WriteFile(*doc, []byte(s), 0o644)
}

func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

func fmtFloats(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.4f", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// refErr returns the mean relative error (centred, as in Compare) of rows
// of got (n×V, float32 or float64 via at) against the float64 reference.
func refErr(ref [][]float64, at func(p, i int) float64, V int) float64 {
	total := 0.0
	for p, r := range ref {
		var ma, mb float64
		for i := range V {
			ma += at(p, i)
			mb += r[i]
		}
		ma, mb = ma/float64(V), mb/float64(V)
		var num, den float64
		for i := range V {
			d := (at(p, i) - ma) - (r[i] - mb)
			num += d * d
			den += (r[i] - mb) * (r[i] - mb)
		}
		total += math.Sqrt(num/den) / float64(len(ref))
	}
	return total
}

// Fixture is the committed parity reference for a small model
// (infer/engine/testdata/parity): the teacher-forcing tokens and, per
// position, llama.cpp's top log-probabilities.
type Fixture struct {
	Source    string      `json:"source"`
	Tokens    []int32     `json:"tokens"`
	TopIDs    [][]int32   `json:"top_ids"`
	TopLogp   [][]float32 `json:"top_logprobs"`
	Positions int         `json:"positions"`
}

func fixture(args []string) error {
	fs := flag.NewFlagSet("fixture", flag.ExitOnError)
	tokPath := fs.String("tokens", "", "tokens JSON")
	refPath := fs.String("ref", "", "llama.cpp log-probabilities")
	vocab := fs.Int("vocab", 0, "vocabulary size")
	top := fs.Int("top", 32, "entries kept per position")
	out := fs.String("out", "", "output JSON file")
	fs.Parse(args)
	toks, err := readTokens(*tokPath)
	if err != nil {
		return err
	}
	ref, err := os.ReadFile(*refPath)
	if err != nil {
		return err
	}
	V := *vocab
	if len(ref) != len(toks)*V*4 {
		return fmt.Errorf("%s: %d bytes, want %d positions × %d × 4", *refPath, len(ref), len(toks), V)
	}
	fx := Fixture{Source: "llama.cpp via node-llama-cpp 3.21.1, non-flash attention, 2 threads (scripts/parity/parity.sh)",
		Tokens: toks, Positions: len(toks)}
	for p := range toks {
		type e struct {
			id int32
			lp float32
		}
		row := make([]e, V)
		for i := range V {
			row[i] = e{int32(i), math.Float32frombits(binary.LittleEndian.Uint32(ref[(p*V+i)*4:]))}
		}
		sort.SliceStable(row, func(a, b int) bool { return row[a].lp > row[b].lp })
		ids, lps := make([]int32, *top), make([]float32, *top)
		for i := range *top {
			ids[i], lps[i] = row[i].id, row[i].lp
		}
		fx.TopIDs, fx.TopLogp = append(fx.TopIDs, ids), append(fx.TopLogp, lps)
	}
	b, err := json.Marshal(fx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, append(b, '\n'), 0o644)
}

// benchRow is one line of `muser bench --json` or engine-bench.mjs.
type benchRow struct {
	Engine       string  `json:"engine"`
	Model        string  `json:"model"`
	Threads      int     `json:"threads"`
	PromptTokens int     `json:"prompt_tokens"`
	GenTokens    int     `json:"gen_tokens"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	FileBytes    int64   `json:"file_bytes"`
}

func benchReport(args []string) error {
	fs := flag.NewFlagSet("benchreport", flag.ExitOnError)
	in := fs.String("in", "", "bench JSON lines")
	doc := fs.String("doc", "", "docs/benchmarks.md")
	cpu := fs.String("cpu", "", "machine description")
	rounds := fs.Int("rounds", 0, "rounds per engine")
	fs.Parse(args)
	data, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	type best struct{ prefill, decode, rss, file float64 }
	type key struct{ model, engine string }
	bests := map[key]*best{}
	var order []string
	threads, prompt, gen := 0, 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r benchRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("%s: %w", *in, err)
		}
		eng := "llama.cpp"
		if strings.HasPrefix(r.Engine, "muser") {
			eng = "muser"
		}
		name := filepath.Base(r.Model)
		k := key{name, eng}
		b := bests[k]
		if b == nil {
			b = &best{}
			bests[k] = b
			if eng == "muser" {
				order = append(order, name)
			}
		}
		b.prefill, b.decode = max(b.prefill, r.PrefillTokS), max(b.decode, r.DecodeTokS)
		b.rss, b.file = max(b.rss, float64(r.PeakRSS)), max(b.file, float64(r.FileBytes))
		threads, prompt, gen = r.Threads, r.PromptTokens, r.GenTokens
	}
	mib := func(v float64) string { return fmt.Sprintf("%.0f", v/(1<<20)) }
	var t strings.Builder
	begin, end := "<!-- engine-bench:begin (scripts/bench.sh rewrites this table) -->", "<!-- engine-bench:end -->"
	t.WriteString(begin + "\n")
	fmt.Fprintf(&t, "%s; %d threads; prefill of a %d-token prompt in one batch, decode of %d tokens one at a time; best of %d alternating rounds each.\n\n",
		*cpu, threads, prompt, gen, *rounds)
	t.WriteString("| model | prefill tok/s muser / llama.cpp | ratio | decode tok/s muser / llama.cpp | ratio | peak RSS MiB muser / llama.cpp | file MiB |\n")
	t.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range order {
		m, l := bests[key{name, "muser"}], bests[key{name, "llama.cpp"}]
		if l == nil {
			l = &best{}
		}
		ratio := func(a, b float64) string {
			if b == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f×", a/b)
		}
		fmt.Fprintf(&t, "| %s | %.1f / %.1f | %s | %.2f / %.2f | %s | %s / %s | %s |\n",
			name, m.prefill, l.prefill, ratio(m.prefill, l.prefill), m.decode, l.decode, ratio(m.decode, l.decode),
			mib(m.rss), mib(l.rss), mib(m.file))
	}
	t.WriteString(end)
	old, err := os.ReadFile(*doc)
	if err != nil {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: marker lines %q and %q not found", *doc, begin, end)
	}
	return os.WriteFile(*doc, []byte(s[:i]+t.String()+s[j+len(end):]), 0o644)
}

// zero copies a model with the data of the tensors whose names match a
// regular expression set to zero bytes (every ggml type decodes zero
// bytes as zeros), for per-operation comparisons: zeroing a layer's
// attn_output and ffn_down makes the layer an identity on the residual
// stream, so the remaining difference is the output path's alone.
func zero(args []string) error {
	fs := flag.NewFlagSet("zero", flag.ExitOnError)
	in := fs.String("model", "", "GGUF model")
	out := fs.String("out", "", "output GGUF")
	pat := fs.String("tensors", "", "regular expression of tensor names to zero")
	fs.Parse(args)
	re, err := regexp.Compile(*pat)
	if err != nil || *pat == "" {
		return fmt.Errorf("zero: -tensors: a regular expression is required (%v)", err)
	}
	f, err := gguf.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	n := 0
	for _, t := range f.Tensors {
		if re.MatchString(t.Name) {
			clear(data[t.Offset : t.Offset+t.Size])
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("zero: no tensor of %s matches %q", *in, *pat)
	}
	fmt.Printf("zeroed %d tensors\n", n)
	return os.WriteFile(*out, data, 0o644)
}

// refvs compares two llama.cpp log-probability files of the same model and
// tokens: how far llama.cpp is from itself under another batching or CPU
// build, on the scale compare uses for muser. File a takes the place of
// muser's logits (log-probabilities differ from logits by a per-position
// constant, which Compare removes); b is the reference whose margins are
// reported.
func refvs(args []string) error {
	fs := flag.NewFlagSet("refvs", flag.ExitOnError)
	aPath := fs.String("a", "", "log-probabilities compared (logits.mjs output)")
	bPath := fs.String("b", "", "reference log-probabilities (logits.mjs output)")
	tokPath := fs.String("tokens", "", "tokens JSON both were recorded over")
	label := fs.String("label", "", "name of the row (default: the two file names)")
	fs.Parse(args)
	if *aPath == "" || *bPath == "" || *tokPath == "" {
		return fmt.Errorf("refvs: -a, -b and -tokens are required")
	}
	toks, err := readTokens(*tokPath)
	if err != nil {
		return err
	}
	a, err := os.ReadFile(*aPath)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(*bPath)
	if err != nil {
		return err
	}
	res, err := refCompare(a, b, len(toks))
	if err != nil {
		return fmt.Errorf("refvs: %s vs %s: %w", *aPath, *bPath, err)
	}
	res.Model = *label
	if res.Model == "" {
		res.Model = filepath.Base(*aPath) + " vs " + filepath.Base(*bPath)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return nil
}

// refCompare is refvs on two log-probability files' bytes of n positions
// each: a in muser's place, b the reference.
func refCompare(a, b []byte, n int) (Result, error) {
	if n == 0 || len(a) != len(b) || len(a)%(n*4) != 0 {
		return Result{}, fmt.Errorf("%d and %d bytes; want the same multiple of %d positions × 4", len(a), len(b), n)
	}
	V := len(a) / (n * 4)
	logits := make([]float32, n*V)
	for i := range logits {
		v := math.Float32frombits(binary.LittleEndian.Uint32(a[i*4:]))
		if math.IsInf(float64(v), -1) {
			v = -1e30 // underflowed probability: below every counted token
		}
		logits[i] = v
	}
	res := Compare(logits, b, n, V)
	res.SelfCompare = true
	return res, nil
}

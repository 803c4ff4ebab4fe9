"""The default model's tokenizer: a SentencePiece BPE model with byte
fallback, and the conventions that make its tokenization equal llama.cpp's.

llama.cpp's "llama" (SPM) tokenizer splits the text at special tokens first,
then merges each remaining fragment by piece score; with add_space_prefix
false it adds no leading space to any fragment. SentencePiece BPE merges by
the same scores, so encoding each fragment with SentencePiece (trained with
add_dummy_prefix false and identity normalisation) and joining the special
ids between them gives exactly llama.cpp's tokens. Every document is encoded
that way for training, and the GGUF says add_space_prefix false.
"""

import gzip
import json
import os
import re

import sentencepiece as spm

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIALS = [IM_START, IM_END]

# llama.cpp token types.
TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6


def render_chat(messages, add_generation_prompt=True):
    """Renders messages without tools as the model's chat template does
    (plain ChatML: defaultmodel.ChatTemplate renders every conversation
    without tools this way). Prompts with tools come rendered by corpusgen
    -tool-eval, through the template itself."""
    out = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    if add_generation_prompt:
        out += f"{IM_START}assistant\n"
    return out


def read_docs(path):
    """Yields (kind, text) from a corpusgen JSON-lines file (gzip or plain)."""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            yield d["kind"], d["text"]


def train(corpus, prefix, vocab_size, seed=1, threads=os.cpu_count(), max_docs=400_000):
    """Trains the SentencePiece model on the first max_docs documents."""
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    # The input path is recorded in the model file, so it is fixed (not a
    # random temporary name) to keep the model byte-identical across runs.
    path = prefix + ".train.txt"
    with open(path, "w", encoding="utf-8") as tmp:
        n = 0
        for _, text in read_docs(corpus):
            for line in text.split("\n"):
                if line:
                    tmp.write(line + "\n")
            n += 1
            if n >= max_docs:
                break
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(
        input=path,
        model_prefix=prefix,
        model_type="bpe",
        vocab_size=vocab_size,
        character_coverage=1.0,
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        split_digits=False,
        user_defined_symbols=SPECIALS,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=threads,
        input_sentence_size=4_000_000,
        shuffle_input_sentence=True,
        max_sentence_length=8192,
        minloglevel=1,
    )
    os.unlink(path)


class Tok:
    def __init__(self, model_path):
        self.sp = spm.SentencePieceProcessor(model_file=model_path)
        self.n_vocab = self.sp.get_piece_size()
        self.bos = self.sp.bos_id()
        self.im_start = self.sp.piece_to_id(IM_START)
        self.im_end = self.sp.piece_to_id(IM_END)
        self.eos = self.im_end  # the one end-of-text token
        # Text of every control, unknown or user-defined piece is parsed as
        # that one token, as llama.cpp does when it parses special tokens.
        self.special = {IM_START: self.im_start, IM_END: self.im_end}
        for i in range(self.n_vocab):
            if self.sp.is_control(i) or self.sp.is_unknown(i):
                self.special[self.sp.id_to_piece(i)] = i
        self.split = re.compile("(" + "|".join(re.escape(p) for p in sorted(self.special, key=len, reverse=True)) + ")")

    def encode(self, text):
        """Tokens of text (no BOS), specials parsed, as llama.cpp does."""
        ids = []
        for frag in self.split.split(text):
            if not frag:
                continue
            if frag in self.special:
                ids.append(self.special[frag])
            else:
                ids.extend(self.sp.encode(frag))
        return ids

    def encode_many(self, texts):
        """encode for a list of texts, with one batched SentencePiece call."""
        frags, plans = [], []
        for t in texts:
            plan = []
            for frag in self.split.split(t):
                if not frag:
                    continue
                if frag in self.special:
                    plan.append((True, self.special[frag]))
                else:
                    plan.append((False, len(frags)))
                    frags.append(frag)
            plans.append(plan)
        enc = self.sp.encode(frags)
        out = []
        for plan in plans:
            ids = []
            for is_special, v in plan:
                if is_special:
                    ids.append(v)
                else:
                    ids.extend(enc[v])
            out.append(ids)
        return out

    def decode(self, ids):
        return self.sp.decode([i for i in ids if i not in (self.im_start, self.im_end, self.bos)])

    def gguf_vocab(self):
        """tokens, scores and llama.cpp token types for the GGUF metadata."""
        tokens, scores, types = [], [], []
        for i in range(self.n_vocab):
            p = self.sp.id_to_piece(i)
            tokens.append(p)
            scores.append(self.sp.get_score(i))
            if self.sp.is_unknown(i):
                types.append(TT_UNKNOWN)
            elif self.sp.is_control(i) or p in self.special:
                types.append(TT_CONTROL)
            elif self.sp.is_byte(i):
                types.append(TT_BYTE)
            elif self.sp.is_unused(i):
                types.append(TT_UNUSED)
            else:
                types.append(TT_NORMAL)
        return tokens, scores, types

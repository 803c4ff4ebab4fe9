package defaultmodel

// Pooling is how muser serve pools the embedded model's hidden states into
// one embedding when the file declares no llama.pooling_type and no
// --pooling flag is given: the mean over the input's tokens (llama.cpp's
// pooling_type 1), then L2-normalized by the routes that normalize. A
// causal model has no pooling of its own; the mean uses every token's
// state, which suits a small decoder best, and lets the embeddings routes
// answer with the default model out of the box.
const Pooling = "mean"

package blockdraft

// LogitsForTest returns copies of the logits rows the last Draft call
// computed in its last output product, in request order (all of a call's
// rows when they number at most 64).
func (m *Model) LogitsForTest() [][]float32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := &m.ws
	n := len(w.out) % logitRows
	if n == 0 && len(w.out) > 0 {
		n = logitRows
	}
	V := m.cfg.Vocab
	out := make([][]float32, n)
	for i := range out {
		out[i] = append([]float32(nil), w.logits[i*V:(i+1)*V]...)
	}
	return out
}

package serve

import (
	"time"

	"github.com/muserhq/muser/serve/sched"
)

// requestTimings is muser's timings object: what one request cost and
// where its prompt was computed. A chat completion carries it when the
// request sets "timings": true (a muser extension; docs/serve.md). Every
// figure is measured by this server for this request; a phase that did not
// run is null, never 0.
type requestTimings struct {
	// PromptTokens, CachedTokens and CacheSource repeat the usage: the
	// prompt's tokens, those not computed, and where they came from
	// ("store", "slot" or "" for none).
	PromptTokens int    `json:"prompt_tokens"`
	CachedTokens int    `json:"cached_tokens"`
	CacheSource  string `json:"cache_source"`
	// QueueMS is the wait for a slot.
	QueueMS *float64 `json:"queue_ms"`
	// RemotePrefillMS is the time the prefill producer took to compute and
	// ship the prompt's uncached blocks (null without --prefill-node).
	RemotePrefillMS *float64 `json:"remote_prefill_ms"`
	// RestoreMS is the verified restore of the cached prefix from the
	// store (null when none ran).
	RestoreMS *float64 `json:"restore_ms"`
	// PrefillTokens and PrefillMS are the prompt tokens computed here and
	// the time they took.
	PrefillTokens int      `json:"prefill_tokens"`
	PrefillMS     *float64 `json:"prefill_ms"`
	// TTFTMS is the time from the request's arrival to its first token.
	TTFTMS *float64 `json:"ttft_ms"`
	// DecodeTokens, DecodeMS and DecodeTokensPerSecond cover the tokens
	// after the first: their number, their time, and the rate.
	DecodeTokens          int      `json:"decode_tokens"`
	DecodeMS              *float64 `json:"decode_ms"`
	DecodeTokensPerSecond *float64 `json:"decode_tokens_per_second"`
	// PrefillAt is "local", or "peer:NAME" when the producer node NAME
	// computed the prompt's uncached whole blocks.
	PrefillAt string `json:"prefill_at"`
}

// timingsOf measures res, whose request arrived at received.
func timingsOf(res sched.Result, received time.Time) *requestTimings {
	span := func(from, to time.Time) *float64 {
		if from.IsZero() || to.IsZero() {
			return nil
		}
		v := ms(to.Sub(from))
		return &v
	}
	if received.IsZero() {
		received = res.Queued
	}
	t := &requestTimings{
		PromptTokens:  res.PromptTokens,
		CachedTokens:  res.CachedTokens,
		CacheSource:   res.CacheSource,
		QueueMS:       span(res.Queued, res.Started),
		PrefillTokens: res.PromptTokens - res.CachedTokens,
		TTFTMS:        span(received, res.FirstToken),
		PrefillAt:     "local",
	}
	prefillFrom := res.Started
	if !res.RemoteDone.IsZero() {
		t.RemotePrefillMS = span(res.Started, res.RemoteDone)
		prefillFrom = res.RemoteDone
	}
	if !res.Restored.IsZero() {
		t.RestoreMS = span(prefillFrom, res.Restored)
		prefillFrom = res.Restored
	}
	t.PrefillMS = span(prefillFrom, res.PrefillDone)
	if res.PrefillAt != "" {
		t.PrefillAt = "peer:" + res.PrefillAt
	}
	if n := len(res.Generated) - 1; n > 0 && !res.FirstToken.IsZero() {
		t.DecodeTokens = n
		t.DecodeMS = span(res.FirstToken, res.Done)
		if d := res.Done.Sub(res.FirstToken); d > 0 {
			v := float64(n) / d.Seconds()
			t.DecodeTokensPerSecond = &v
		}
	}
	return t
}

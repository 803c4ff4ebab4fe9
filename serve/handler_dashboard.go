package serve

import (
	"net/http"
	"strconv"

	"github.com/muserhq/muser/serve/dashboard"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
)

// ollamaProbe is what Ollama answers at `/`; its clients and tools probe
// for it.
const ollamaProbe = "Ollama is running"

// handleRoot answers `GET /` (and HEAD): the dashboard for a browser,
// Ollama's probe text for anything else.
func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request) {
	if dashboard.WantsHTML(r) {
		s.dash.ServeIndex(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(ollamaProbe)))
	w.Write([]byte(ollamaProbe))
}

// newDashboard builds the dashboard over the server and returns its
// recorder, for the scheduler's Observer. It runs in New before the
// scheduler exists: the closures read s.sched when called.
func (s *Server) newDashboard() *dashboard.Recorder {
	o := s.opts
	s.dash = &dashboard.Config{
		Store:    s.store,
		Recorder: dashboard.NewRecorder(),
		Identity: s.identity,
		Model:    s.model.id,
		Version:  o.Version,
		Slots: func() []sched.SlotInfo {
			if s.sched == nil {
				return nil
			}
			return s.sched.SlotInfos()
		},
		QueueDepth: func() int {
			if s.sched == nil {
				return 0
			}
			return s.sched.QueueDepth()
		},
		Settings: s.dashSettings,
		Cluster:  o.Cluster,
		Allow:    s.adminAllowed, // the state shows every tenant's packs: the admin endpoint's rule
	}
	return s.dash.Recorder
}

// dashSettings are the configured values the dashboard shows.
func (s *Server) dashSettings() []dashboard.Setting {
	o := s.opts
	set := []dashboard.Setting{
		{Name: "parallel", Value: float64(s.sched.Slots()), Unit: "slots", Source: "--parallel"},
		{Name: "ctx", Value: float64(s.sched.Ctx()), Unit: "tokens", Source: "--ctx"},
		{Name: "max_queue", Value: float64(s.maxQueue()), Unit: "requests", Source: "--max-queue"},
		{Name: "slot_reuse", Value: boolValue(o.SlotReuse), Unit: "on/off", Source: "--slot-reuse"},
	}
	if o.StoreMaxBytes > 0 {
		set = append(set, dashboard.Setting{Name: "store_max_bytes", Unit: "bytes", Source: "--store-max-bytes", Value: float64(o.StoreMaxBytes)})
	}
	return set
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// maxQueue is the queue bound the scheduler will use.
func (s *Server) maxQueue() int {
	switch {
	case s.opts.MaxQueue == 0:
		return sched.DefaultMaxQueue
	case s.opts.MaxQueue < 0:
		return 0
	}
	return s.opts.MaxQueue
}

// observers passes the scheduler's measurements to the Prometheus metrics
// and to the dashboard's recorder.
type observers struct {
	*metrics
	rec *dashboard.Recorder
}

var _ sched.Observer = observers{}

// Queue, Busy and StoreBytes go to the metrics only: the dashboard reads
// them live.
func (o observers) Queue(depth int) { o.metrics.Queue(depth) }
func (o observers) Busy(slots int)  { o.metrics.Busy(slots) }
func (o observers) Prefix(prompt, cached int, source string) {
	o.metrics.Prefix(prompt, cached, source)
	o.rec.Prefix(prompt, cached, source)
}
func (o observers) Refused(reason string) { o.metrics.Refused(reason); o.rec.Refused(reason) }
func (o observers) Finished(req *sched.Request, res sched.Result) {
	o.metrics.Finished(req, res)
	o.rec.Finished(req, res)
}
func (o observers) Published(res store.PublishResult, err error) {
	o.metrics.Published(res, err)
	o.rec.Published(res, err)
}
func (o observers) PublishDropped()    { o.metrics.PublishDropped(); o.rec.PublishDropped() }
func (o observers) StoreBytes(n int64) { o.metrics.StoreBytes(n) }

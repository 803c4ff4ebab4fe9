package dashboard

// Tags say what a Figure is.
const (
	// TagMeasured is a figure this process measured, over Figure.Window.
	TagMeasured = "measured"
	// TagConfigured is a target or a flag: what was asked, not observed.
	TagConfigured = "configured"
	// TagUnavailable is a figure that is not known; Figure.Reason says
	// why.
	TagUnavailable = "unavailable"
)

// Figure is one number of the dashboard with its honesty tag: measured
// (with the window it covers), configured (with the flag or option it
// comes from), or unavailable (with the reason). The page shows the tag
// beside every number and never invents one.
type Figure struct {
	// Value is the number; nil when Tag is TagUnavailable.
	Value *float64 `json:"value"`
	// Unit is the value's unit ("ms", "tokens", "bytes", "ratio", ...).
	Unit string `json:"unit,omitempty"`
	// Tag is TagMeasured, TagConfigured or TagUnavailable.
	Tag string `json:"tag"`
	// Window is, for a measured figure, what it covers ("since start",
	// "last 10m", "now", "this request").
	Window string `json:"window,omitempty"`
	// Source is, for a configured figure, the flag or option that set it;
	// for a measured one, where it was read.
	Source string `json:"source,omitempty"`
	// Reason says why a figure is unavailable.
	Reason string `json:"reason,omitempty"`
}

// Measured returns a measured figure.
func Measured(v float64, unit, window, source string) Figure {
	return Figure{Value: &v, Unit: unit, Tag: TagMeasured, Window: window, Source: source}
}

// Configured returns a configured figure.
func Configured(v float64, unit, source string) Figure {
	return Figure{Value: &v, Unit: unit, Tag: TagConfigured, Source: source}
}

// Unavailable returns an unavailable figure.
func Unavailable(unit, reason string) Figure {
	return Figure{Unit: unit, Tag: TagUnavailable, Reason: reason}
}

package infertest

import (
	"strings"
	"testing"
)

func TestStory(t *testing.T) {
	tests := []struct {
		seed, n int
		prefix  string
	}{
		{0, 0, ""},
		{0, 3, "once little play"},
		{1, 3, "upon girl with"},
	}
	for _, tc := range tests {
		got := Story(tc.seed, tc.n)
		if len(strings.Fields(got)) != tc.n || !strings.HasPrefix(got, tc.prefix) {
			t.Errorf("Story(%d, %d) = %q; want %d words starting %q", tc.seed, tc.n, got, tc.n, tc.prefix)
		}
	}
	if Story(0, 200) == Story(1, 200) {
		t.Error("seeds do not change the story")
	}
}

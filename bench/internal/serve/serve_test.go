package serve

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

func TestBare(t *testing.T) {
	w := httptest.NewRecorder()
	Bare(w, httptest.NewRequest("GET", "/", nil))
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || w.Code != 200 || v["allowed"] != true {
		t.Errorf("bare: %d %s (%v)", w.Code, w.Body, err)
	}
}

func TestGubernatorBody(t *testing.T) {
	var v struct {
		Requests []struct {
			Name      string `json:"name"`
			UniqueKey string `json:"unique_key"`
			Hits      int64  `json:"hits"`
			Limit     int64  `json:"limit"`
			Duration  int64  `json:"duration"`
			Algorithm int    `json:"algorithm"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(GubernatorBody(`user-"7"`, 3_600_000, 1e12), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Requests) != 1 || v.Requests[0].UniqueKey != `user-"7"` || v.Requests[0].Limit != 1e12 || v.Requests[0].Duration != 3_600_000 || v.Requests[0].Hits != 1 {
		t.Errorf("body decodes to %+v", v)
	}
}

func TestRedisKey(t *testing.T) {
	if got, want := RedisKey("user-1", 1000, 42), "rl:user-1:1000:42"; got != want {
		t.Errorf("RedisKey = %q, want %q", got, want)
	}
}

func TestParseScale(t *testing.T) {
	for in, want := range map[string]int64{"3600000": 3_600_000, "1h": 3_600_000, "30s": 30_000, "1ms": 1} {
		if got, err := parseScale(in); err != nil || got != want {
			t.Errorf("parseScale(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-5", "1us", "soon"} {
		if _, err := parseScale(bad); err == nil {
			t.Errorf("parseScale(%q): no error", bad)
		}
	}
}

func TestRunUnknownRole(t *testing.T) {
	if err := Run("nope", "127.0.0.1:0", ""); err == nil {
		t.Error("Run(nope): no error")
	}
}

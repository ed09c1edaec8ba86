package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/actors/actorstest"
	"github.com/ratelimitd/ratelimitd/api/admin"
)

func TestClusterStatusIsServedWithTheToken(t *testing.T) {
	t.Parallel()
	sys, _ := actorstest.StartClocked(t)
	serve := func(cluster func() any) string {
		h, err := admin.NewHandler(admin.Options{Backend: backend{sys}, Token: adminToken, Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	type member struct {
		ID      string `json:"id"`
		VShards int    `json:"vshards"`
	}
	with := serve(func() any {
		return struct {
			Epoch   int64    `json:"epoch"`
			Members []member `json:"members"`
		}{Epoch: 42, Members: []member{{"m-a", 512}, {"m-b", 512}}}
	})
	without := serve(nil)
	for _, tc := range []struct {
		base, method, token string
		status              int
		body, allow         string
	}{
		{with, http.MethodGet, adminToken, 200, `{"epoch":42,"members":[{"id":"m-a","vshards":512},{"id":"m-b","vshards":512}]}`, ""},
		{with, http.MethodGet, "wrong", 401, "", ""},
		{with, http.MethodPost, adminToken, 405, "", "GET"},
		{without, http.MethodGet, adminToken, 404, "", ""},
	} {
		req, _ := http.NewRequest(tc.method, tc.base+"/cluster", nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		if resp.StatusCode != tc.status || tc.body != "" && body != tc.body ||
			tc.allow != "" && !strings.Contains(resp.Header.Get("Allow"), tc.allow) {
			t.Errorf("%s /cluster (token %q): got %d %s (Allow %q), want %d %s", tc.method, tc.token, resp.StatusCode, body, resp.Header.Get("Allow"), tc.status, tc.body)
		}
		if tc.status == 200 && resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
		}
	}
}

package admin_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/api/internal/apitest"
	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

// TestIDMustBeUTF8: every endpoint that takes an id answers 400 naming it,
// with the exact body, when the id is not valid UTF-8 (percent-encoded
// bytes in a query, raw bytes or an unpaired surrogate escape in JSON), and
// counts nothing; ids that are valid, U+FFFD itself included, pass.
func TestIDMustBeUTF8(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, rules.Rule{Name: "login", Policy: table.Policy{Scale: time.Minute, Limit: 2}})
	surrogateRule := `must be valid UTF-8: a surrogate escape (\\uD800 to \\uDFFF) must be half of a pair`
	batchBody := func(i int, rule string) string {
		f := "checks[" + strconv.Itoa(i) + "].id"
		return `{"error":"` + f + `: ` + rule + `","field":"` + f + `"}`
	}
	tests := []struct {
		name, method, path, body string
		admin                    bool
		want                     string
	}{
		{"GET check_rate", "GET", "/check_rate?id=%ff&scale=1000&limit=5", "", false, apitest.BadUTF8Body},
		{"GET check_rate, a cut sequence", "GET", "/check_rate?id=a%e2%82&scale=1000&limit=5", "", false, apitest.BadUTF8Body},
		{"GET check_rate, an encoded surrogate", "GET", "/check_rate?id=%ed%a0%80&scale=1000&limit=5", "", false, apitest.BadUTF8Body},
		{"GET check_rate by rule", "GET", "/check_rate?id=a%c0%afb&rule=login", "", false, apitest.BadUTF8Body},
		{"POST check_rate, raw byte", "POST", "/check_rate", "{\"id\":\"\xff\",\"scale\":1000,\"limit\":5}", false, apitest.BadUTF8Body},
		{"POST check_rate, raw byte after an escape", "POST", "/check_rate", "{\"id\":\"\\n\xfe\",\"scale\":1000,\"limit\":5}", false, apitest.BadUTF8Body},
		{"POST check_rate, low surrogate", "POST", "/check_rate", `{"id":"\udc00","scale":1000,"limit":5}`, false, apitest.BadSurrogateBody},
		{"POST check_rate, high surrogate at the end", "POST", "/check_rate", `{"id":"a\uD800","scale":1000,"limit":5}`, false, apitest.BadSurrogateBody},
		{"POST check_rate, high surrogate then a letter", "POST", "/check_rate", `{"id":"\ud800\u0041","scale":1000,"limit":5}`, false, apitest.BadSurrogateBody},
		{"POST check_rate, two high surrogates", "POST", "/check_rate", `{"id":"\ud800\ud800\udc00","scale":1000,"limit":5}`, false, apitest.BadSurrogateBody},
		{"POST check_rate by rule", "POST", "/check_rate", `{"id":"\udfff","rule":"login"}`, false, apitest.BadSurrogateBody},
		{"POST batch, raw byte", "POST", "/check_rate", "[{\"id\":\"a\",\"scale\":1000,\"limit\":5},{\"id\":\"b\x80\",\"scale\":1000,\"limit\":5}]", false,
			batchBody(1, "must be valid UTF-8")},
		{"POST batch, surrogate", "POST", "/check_rate", `[{"id":"\udc00x","rule":"login"},{"id":"a","scale":1000,"limit":5}]`, false,
			batchBody(0, surrogateRule)},
		{"GET refund", "GET", "/refund?id=%ff&scale=1000&limit=5&hits=-1", "", false, apitest.BadUTF8Body},
		{"POST refund", "POST", "/refund", "{\"id\":\"\xff\",\"scale\":1000,\"limit\":5,\"hits\":-1}", false, apitest.BadUTF8Body},
		{"POST refund, surrogate", "POST", "/refund", `{"id":"\udc00","rule":"login","hits":-1}`, false, apitest.BadSurrogateBody},
		{"admin reset", "POST", "/reset?id=%ff&scale=1000&limit=5", "", true, apitest.BadUTF8Body},
		{"admin reset by rule", "POST", "/reset?id=%ff&rule=login", "", true, apitest.BadUTF8Body},
		{"admin buckets", "GET", "/buckets?id=%fe%ff", "", true, apitest.BadUTF8Body},
	}
	for _, tt := range tests {
		var r apitest.Response
		if tt.admin {
			r = f.call(t, tt.method, tt.path, tt.body)
		} else {
			r = apitest.Do(t, http.DefaultClient, tt.method, f.public+tt.path, tt.body)
		}
		if r.Status != http.StatusBadRequest || string(r.Body) != tt.want {
			t.Errorf("%s: got %d %s, want 400 %s", tt.name, r.Status, r.Body, tt.want)
		}
	}
	// Nothing was counted: U+FFFD, which the bytes above used to become, has
	// a bucket of its own, untouched, and distinct from a surrogate pair's.
	valid := []struct{ method, path, body, id string }{
		{"POST", "/check_rate", `{"id":"\ufffd","scale":1000,"limit":5}`, "\ufffd"},
		{"GET", "/check_rate?id=%ef%bf%bd&scale=1000&limit=5", "", "\ufffd"},
		{"POST", "/check_rate", `{"id":"\ud83d\ude00","scale":1000,"limit":5}`, "😀"},
		{"GET", "/check_rate?id=%f0%9f%98%80&scale=1000&limit=5", "", "😀"},
	}
	for i, v := range valid {
		r := apitest.Do(t, http.DefaultClient, v.method, f.public+v.path, v.body)
		if r.Status != http.StatusOK {
			t.Fatalf("%s %s: got %d %s, want 200", v.method, v.path, r.Status, r.Body)
		}
		d := apitest.Decision(t, r)
		if want := int64(i%2 + 1); d.ID != v.id || d.Count != want {
			t.Errorf("%s %s: got id %q count %d, want %q count %d", v.method, v.path, d.ID, d.Count, v.id, want)
		}
	}
}

package dashboard_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/api/dashboard"
)

// Serve the dashboard with a live traffic series the checks record into,
// and run the playground's boundary case through it.
func Example() {
	traffic := &dashboard.TrafficRing{}
	h, err := dashboard.New(dashboard.Options{Token: "an-admin-token", Traffic: traffic})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h) // in the daemon: the admin listener
	defer srv.Close()

	traffic.Record(dashboard.Denied, time.Now()) // on the check path

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/simulate",
		strings.NewReader(`{"policy":{"limit":100,"scale":"1s"},"traffic":{"shape":"boundary"},"bucket":"1s"}`))
	req.Header.Set("Authorization", "Bearer an-admin-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var res dashboard.SimResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status)
	for _, a := range res.Algorithms {
		fmt.Println(a.Algorithm, a.Admitted)
	}
	// Output:
	// 200 OK
	// fixed_window 199
	// sliding_window 104
	// token_bucket 110
	// leaky_bucket 2
}

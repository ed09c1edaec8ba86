package rules_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/api/rules"
	"github.com/ratelimitd/ratelimitd/table"
)

func Example() {
	list, err := rules.Parse([]byte(`
rules:
  - name: login
    scale: 30s
    limit: 5
    match: {prefix: /api/login, method: post}
  - name: api
    scale: 60000
    limit: 600
    match: {prefix: /api}
  - name: reports        # used only by name: ?rule=reports
    scale: 1h
    limit: 10
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := rules.NewStore(list)
	if err != nil {
		fmt.Println(err)
		return
	}
	show := func(method, path string) {
		if r, ok := st.Match(method, "example.com", path); ok {
			fmt.Printf("%s %s: %s, %d per %v\n", method, path, r.Name, r.Limit, r.Scale)
		} else {
			fmt.Printf("%s %s: no rule\n", method, path)
		}
	}
	show("POST", "/api/login")
	show("GET", "/api/login")
	show("GET", "/API/users")
	show("GET", "/apix")

	if r, ok := st.Current().Get("reports"); ok {
		fmt.Printf("?rule=reports: %d per %v\n", r.Limit, r.Scale)
	}

	s, _ := st.Delete("login")
	fmt.Println("version", s.Version())
	show("POST", "/api/login")
	// Output:
	// POST /api/login: login, 5 per 30s
	// GET /api/login: api, 600 per 1m0s
	// GET /API/users: api, 600 per 1m0s
	// GET /apix: no rule
	// ?rule=reports: 10 per 1h0m0s
	// version 2
	// POST /api/login: api, 600 per 1m0s
}

func ExampleParse_error() {
	_, err := rules.Parse([]byte(`
rules:
  - name: login
    scale: 30s
    limit: 5
  - name: search
    scale: 0
    limit: 100
`))
	var e *rules.Error
	if errors.As(err, &e) {
		fmt.Println(err)
		fmt.Println(e.Index, e.Name, e.Field, e.Line, errors.Is(err, rules.ErrInvalid))
	}
	// Output:
	// line 7: rules[1] "search": scale: must be between 1ms and 8784h0m0s
	// 1 search scale 7 true
}

func ExampleMarshal() {
	data, err := rules.Marshal([]rules.Rule{{
		Name:   "login",
		Policy: table.Policy{Scale: 90 * time.Second, Limit: 5},
		Match:  rules.Match{Prefix: "/api/login", Method: "post", Host: "Example.com:8080"},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(data))
	// Output:
	// rules:
	//   - name: login
	//     algorithm: fixed_window
	//     scale: 1m30s
	//     limit: 5
	//     match:
	//       prefix: /api/login
	//       method: POST
	//       host: example.com
}

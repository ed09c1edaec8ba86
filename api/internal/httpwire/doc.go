// Package httpwire is what the HTTP transports of ratelimitd share: the
// parsers of check parameters (a query string, a JSON body, a batch),
// their resolution against the named rules, and the Responder that writes
// decisions, batches and JSON errors, so that every transport speaks
// exactly the same format (README.md is its contract).
//
// The parsers check each parameter as they read it and leave the table's
// rules of a whole request to the Checker; the GET parser allocates
// nothing on its fast path, the POST parser one string per body.
package httpwire

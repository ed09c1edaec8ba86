package report

import "testing"

func TestDump(t *testing.T) {
	if _, err := Write("/tmp/rep", synthetic()); err != nil {
		t.Fatal(err)
	}
}

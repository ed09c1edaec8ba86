package grpcload

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// TestRenderedHeaders: a request's header block carries the six fields of
// a gRPC call and leaves no entry in the decoder's table, so that the
// same block is valid on any connection, any number of times.
func TestRenderedHeaders(t *testing.T) {
	t.Parallel()
	r := render("127.0.0.1:1", shouldRateLimitPath, []byte("msg"))
	n := int(r.frames[0])<<16 | int(r.frames[1])<<8 | int(r.frames[2])
	if r.frames[3] != frameHeaders || r.frames[4] != flagEndHeaders || r.dataAt != frameHeaderLen+n {
		t.Fatalf("HEADERS frame: type %d, flags %d, length %d, DATA at %d", r.frames[3], r.frames[4], n, r.dataAt)
	}
	var got []string
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f.Name+": "+f.Value) })
	for range 2 {
		got = got[:0]
		if _, err := dec.Write(r.frames[frameHeaderLen:r.dataAt]); err != nil {
			t.Fatal(err)
		}
		want := ":method: POST|:scheme: http|:path: /envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit|:authority: 127.0.0.1:1|content-type: application/grpc|te: trailers"
		if strings.Join(got, "|") != want {
			t.Errorf("got headers %q, want %q", strings.Join(got, "|"), want)
		}
	}
	// A block that added entries would have grown the table.
	dec.SetMaxDynamicTableSize(0)
	got = got[:0]
	if _, err := dec.Write(r.frames[frameHeaderLen:r.dataAt]); err != nil || len(got) != 6 {
		t.Errorf("with no table: %d fields, %v", len(got), err)
	}
	d := r.frames[r.dataAt:]
	if d[3] != frameData || d[4] != flagEndStream || string(d[frameHeaderLen:]) != "\x00\x00\x00\x00\x03msg" || r.dataLen != 8 {
		t.Errorf("DATA frame %q, payload length %d", d, r.dataLen)
	}
}

// cannedServer is a minimal gRPC server over HTTP/2 that answers every
// call with answer, its headers indexed in its table as gRPC servers do:
// it allocates nothing per call once warm, so that a test counts the
// client's allocations alone.
func cannedServer(t *testing.T, answer []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go serveCanned(nc, answer)
		}
	}()
	return ln.Addr().String()
}

func serveCanned(nc net.Conn, answer []byte) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	if _, err := io.ReadFull(br, make([]byte, len(h2Preface))); err != nil {
		return
	}
	var block []byte
	enc := hpack.NewEncoder(byteWriter{&block})
	out := appendFrameHeader(nil, 0, frameSettings, 0, 0)
	var hdr [frameHeaderLen]byte
	payload := make([]byte, maxFrameLen)
	for {
		if _, err := nc.Write(out); err != nil {
			return
		}
		out = out[:0]
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		if _, err := io.ReadFull(br, payload[:n]); err != nil {
			return
		}
		stream := binary.BigEndian.Uint32(hdr[5:])
		switch {
		case hdr[3] == frameSettings && hdr[4]&flagAck == 0:
			out = appendFrameHeader(out, 0, frameSettings, flagAck, 0)
		case hdr[3] == frameData && hdr[4]&flagEndStream != 0:
			block = block[:0]
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
			out = appendFrameHeader(out, len(block), frameHeaders, flagEndHeaders, stream)
			out = append(out, block...)
			out = appendFrameHeader(out, 5+len(answer), frameData, 0, stream)
			out = append(out, 0)
			out = binary.BigEndian.AppendUint32(out, uint32(len(answer)))
			out = append(out, answer...)
			block = block[:0]
			_ = enc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: "0"})
			_ = enc.WriteField(hpack.HeaderField{Name: "grpc-message", Value: ""})
			out = appendFrameHeader(out, len(block), frameHeaders, flagEndHeaders|flagEndStream, stream)
			out = append(out, block...)
		}
	}
}

// TestCallAllocations: once its connection is warm, a call of Run's
// allocates nothing in the client: its frames are rendered once, its
// buffers reused, its answer checked in wire format. (AllocsPerRun
// refuses to run in parallel; the race detector allocates on its own.)
func TestCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	answer, err := proto.Marshal(&rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
		Code: rlsv3.RateLimitResponse_OK, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10}, LimitRemaining: 9,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(&Target{Name: "canned", Addr: cannedServer(t, answer), Requests: Requests("bench", "user", []string{"a", "b"})}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	i := 0
	call := func() {
		i++
		if _, err := c.send(ctx, c.slots[0], i); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		call()
	}
	if got := testing.AllocsPerRun(1000, call); got != 0 {
		t.Errorf("%v allocations per call, want 0", got)
	}
	resp, err := c.Call(ctx, 0)
	if err != nil || resp.Statuses[0].LimitRemaining != 9 {
		t.Errorf("Call: %v, %v", resp, err)
	}
}

package brokermsg

import (
	"strings"
	"testing"
)

var sink []byte

// The appenders' speed on the bench's body (internal/benchmark/brokers.go)
// and on a 40-line stack trace (an escape every 33 bytes).

func BenchmarkAppendBodyASCII(b *testing.B) {
	body := []byte(`{"order":1,"note":"` + strings.Repeat("x", 900) + `"}`)
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		sink = AppendBody(buf[:0], body)
	}
}

func BenchmarkAppendStringStack(b *testing.B) {
	v := []byte("x.ListenerExecutionFailedException: x\n" + strings.Repeat("\tat com.acme.Foo.bar(Foo.java:1)\n", 40))
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		sink = AppendBin(buf[:0], v)
	}
}

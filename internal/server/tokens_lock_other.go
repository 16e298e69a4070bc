//go:build !unix

package server

// lockTokenFile: without flock, writers in one process are still
// serialised by Tokens' mutex; across processes, run one writer at a time.
func lockTokenFile(string) (func(), error) { return func() {}, nil }

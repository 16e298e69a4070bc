package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// progress shows a running count on a terminal's stderr during long runs;
// it prints nothing when stderr is not a terminal (cron, pipes, tests).
type progress struct {
	w     io.Writer
	verb  string
	n     atomic.Int64
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startProgress(w io.Writer, verb string) *progress {
	p := &progress{w: w, verb: verb, start: time.Now(), stop: make(chan struct{})}
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				fmt.Fprint(p.w, "\r\033[K")
				return
			case <-t.C:
				n := p.n.Load()
				rate := float64(n) / time.Since(p.start).Seconds()
				fmt.Fprintf(p.w, "\r\033[K%s %d entries (%.0f/s)", p.verb, n, rate)
			}
		}
	}()
	return p
}

func (p *progress) add(n int64) { p.n.Add(n) }

func (p *progress) done() {
	close(p.stop)
	p.wg.Wait()
}

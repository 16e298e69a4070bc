package benchmark

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SelfPeakKB returns this process's peak resident set size in kB: VmHWM
// from /proc/self/status, the high-water mark of this process's own
// address space. getrusage's ru_maxrss is no use for a child: it starts
// from the peak of the process that forked it (PERF-NOTES.md).
func SelfPeakKB() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peak RSS: VmHWM %q: %w", rest, err)
			}
			return kb, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	return 0, fmt.Errorf("peak RSS: no VmHWM in /proc/self/status")
}

// child runs `replayctl ARGS...` as the measured process, through `bench
// peak`, which reports that process's own peak RSS. It returns the wall
// time and the peak in MB.
func (c *Config) child(ctx context.Context, args ...string) (time.Duration, float64, error) {
	file := filepath.Join(c.Dir, "peak.txt")
	cmd := exec.CommandContext(ctx, c.Self, append([]string{"bench", "peak", file}, args...)...)
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if err != nil {
		return 0, 0, fmt.Errorf("%s %s: %v: %s", c.Self, strings.Join(args, " "), err, stderr.String())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, err
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("peak RSS file %s: %w", file, err)
	}
	return took, float64(kb) / 1024, nil
}

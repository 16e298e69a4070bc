package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/replayctl/replayctl/internal/triage"
)

// errConfigInvalid marks a run refused because rules.yaml or a policy does
// not load. Only runs are refused: the UI, the API and approvals keep
// working, since people need them most while the configuration is broken.
var errConfigInvalid = errors.New("runs refused: rules.yaml or a policy is invalid")

// engine loads rules and policies for a run and records the outcome in
// replayctl_config_valid, so the ReplayctlConfigInvalid alert fires.
func (s *Server) engine(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
	stamp := configStamp(s.cfg.ConfigFiles)
	e, snap, err := s.cfg.Engine(ctx)
	if err != nil {
		err = fmt.Errorf("%w: %w", errConfigInvalid, err)
		s.metrics.configValid.Set(0)
	} else {
		s.metrics.configValid.Set(1)
	}
	s.lastLoad.record(stamp, err)
	if err != nil {
		return nil, snap, err
	}
	return e, snap, nil
}

// lastLoad is what the last configuration load found, for /readyz: an
// anonymous /readyz compiled every rule and policy on each call, and 16
// clients drove serve to 1.6 cores (issue 29). Readiness now reads the
// verdict the last load left (a run's, a plan's, or its own) and loads
// again only when a file of Config.ConfigFiles changed since (one stat per
// file, as the token file is watched).
type lastLoad struct {
	mu     sync.Mutex
	loaded bool
	stamp  string
	err    error
	// reloading lets one /readyz load while the others read the verdict.
	reloading sync.Mutex
}

func (l *lastLoad) record(stamp string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loaded, l.stamp, l.err = true, stamp, err
}

// verdict returns the last load's result when it was made on the files as
// they are now (stamp).
func (l *lastLoad) verdict(stamp string) (fresh bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loaded && l.stamp == stamp, l.err
}

// configReadiness is the configuration's state for /readyz: the last
// load's, or a new load's when the files changed (or none was made yet).
func (s *Server) configReadiness(ctx context.Context) error {
	stamp := configStamp(s.cfg.ConfigFiles)
	if fresh, err := s.lastLoad.verdict(stamp); fresh {
		return err
	}
	if !s.lastLoad.reloading.TryLock() {
		_, err := s.lastLoad.verdict(stamp) // another /readyz is loading
		return err
	}
	defer s.lastLoad.reloading.Unlock()
	if fresh, err := s.lastLoad.verdict(stamp); fresh {
		return err
	}
	_, _, err := s.engine(ctx)
	return err
}

// configStamp fingerprints the configuration files: for each path (a file,
// or a directory and the files directly in it) its size, mtime and inode
// identity. An unreadable path is part of the stamp too.
func configStamp(paths []string) string {
	var b strings.Builder
	stat := func(p string) os.FileInfo {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s:!%v\n", p, err)
			return nil
		}
		fmt.Fprintf(&b, "%s:%d:%d:%s\n", p, fi.Size(), fi.ModTime().UnixNano(), fileID(fi))
		return fi
	}
	for _, p := range paths {
		if fi := stat(p); fi != nil && fi.IsDir() {
			ents, err := os.ReadDir(p)
			if err != nil {
				fmt.Fprintf(&b, "%s:!%v\n", p, err)
				continue
			}
			for _, e := range ents {
				stat(filepath.Join(p, e.Name()))
			}
		}
	}
	return b.String()
}

// loadForRun loads the configuration for a run a request starts, or
// answers 422 when it does not load, so the caller sees why at once
// instead of in a failed run. The run uses what it loaded (nil when it
// answered): the rules and policies are compiled once per run.
func (s *Server) loadForRun(w http.ResponseWriter, r *http.Request) *loadedConfig {
	e, snap, err := s.engine(r.Context())
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_configuration", err.Error())
		return nil
	}
	return &loadedConfig{engine: e, snap: snap}
}

// loadedConfig is a compiled configuration: the engine and its snapshot.
type loadedConfig struct {
	engine *triage.Engine
	snap   triage.Snapshot
}

// requestEngine loads the configuration at most once for one request (a
// multi-approve checks each request's evidence against the same rules).
type requestEngine struct {
	load func(context.Context) (*triage.Engine, triage.Snapshot, error)
	once sync.Once
	cfg  loadedConfig
	err  error
}

func (s *Server) requestEngine() *requestEngine { return &requestEngine{load: s.cfg.Engine} }

func (e *requestEngine) get(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
	e.once.Do(func() { e.cfg.engine, e.cfg.snap, e.err = e.load(ctx) })
	return e.cfg.engine, e.cfg.snap, e.err
}

package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 29: concurrent `tokens create` and `tokens revoke` lost writes:
// 13 printed tokens were never stored, and a revoke said "revoked at ..."
// while the token stayed active. Each writer here has its own Tokens, its
// own mutex and its own file handles, as separate processes have: only the
// file lock orders them.
func TestConcurrentTokenWritersLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	setup, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 6
	var victims []Token
	var victimSecrets []string
	for i := range writers {
		secret, tok, err := setup.Issue(fmt.Sprintf("victim-%d", i), RoleViewer, time.Now(), 0)
		if err != nil {
			t.Fatal(err)
		}
		victims, victimSecrets = append(victims, tok), append(victimSecrets, secret)
	}
	var mu sync.Mutex
	var created []string
	var wg sync.WaitGroup
	errs := make(chan error, writers*(each+1))
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				proc, err := LoadTokens(path) // a fresh `replayctl tokens create`
				if err != nil {
					errs <- err
					return
				}
				secret, err := proc.Create(fmt.Sprintf("u%d-%d", w, i), RoleOperator, time.Now())
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				created = append(created, secret)
				mu.Unlock()
				if i == each/2 {
					rev, err := LoadTokens(path) // a fresh `replayctl tokens revoke`
					if err == nil {
						_, err = rev.Revoke(victims[w].ID, time.Now())
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("writer: %v", err)
	}
	final, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, s := range created {
		if _, ok := final.Lookup(s); !ok {
			lost++
		}
	}
	if lost > 0 || len(created) != writers*each {
		t.Errorf("%d of %d printed tokens were never stored", lost, len(created))
	}
	for i, s := range victimSecrets {
		if _, ok := final.Lookup(s); ok {
			t.Errorf("revoke of %s said done, yet the token is still active", victims[i].ID)
		}
	}
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

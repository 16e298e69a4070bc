package nexora

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/pages"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// Nexora pages its dead letters by offset over the PENDING ones, newest
// first (iamvirul/nexora JdbcExecutionStore.findDeadLetters: WHERE
// review_state = ? ORDER BY failed_at DESC LIMIT ? OFFSET ?). The set moves
// while it is read: every entry replayctl replays or resolves meanwhile
// leaves PENDING and everything after it moves up, so plain page after page
// skipped as many entries as had left (a run over 250 read 200). The read
// therefore keeps a cursor on failedAt and, before each page, checks with a
// one-entry request that the entry just before the page is one it already
// read; if not, entries moved up past the page start and it steps back a
// page. New dead letters come in at the top (failedAt is when they failed)
// and are left for the next run.

// pageSize is how many entries one Nexora request asks for: Nexora caps
// its page size at 100 (ObserveCommand.java).
const pageSize = 100

// Live reads a running Nexora's dead letters through its observability
// server (GET /api/dead-letters?state=PENDING&page=N&size=M; iamvirul/nexora
// nexora-cli ObserveCommand.java). NEXORA_TOKEN, when set, is sent as a
// bearer token and never appears in errors.
type Live struct {
	*pages.Reader
	target *Target // Nexora's own replay and its compensating read
}

// NewLive is a live source for the server at base, with the token read
// through getenv (os.Getenv).
func NewLive(spec, base string, getenv func(string) string) (*Live, error) {
	r, err := pages.NewReader(spec, Kind, base)
	if err != nil {
		return nil, err
	}
	if tok := getenv("NEXORA_TOKEN"); tok != "" {
		r.SetCredential("Authorization", "Bearer "+tok)
		r.Client.AddSecret(tok)
	}
	r.CredentialNames = "NEXORA_TOKEN"
	t, err := NewTarget(r.Base, 0, getenv("NEXORA_TOKEN"))
	if err != nil {
		return nil, err
	}
	return &Live{Reader: r, target: t}, nil
}

// Replay asks Nexora to replay the dead letter (Target.Dispatch).
func (s *Live) Replay(ctx context.Context, r connector.Request) connector.Result {
	return s.target.Dispatch(ctx, r)
}

// ProbeEntry is Nexora's compensating read (Target.ProbeEntry).
func (s *Live) ProbeEntry(ctx context.Context, e *entry.Entry) (connector.ProbeResult, string) {
	return s.target.ProbeEntry(ctx, e)
}

// Ref names the dead letter by its id; Nexora has no page for one record
// (its /api/dead-letters/{id} answers only POST replay and resolve).
func (s *Live) Ref(e *entry.Entry) connector.Link { return connector.Link{Name: e.ID} }

// Codes lists the failure codes Nexora writes.
func (s *Live) Codes() []connector.Code { return Codes() }

var _ connector.Connector = (*Live)(nil)

// NativeTarget is the --target value that replays this source's entries
// through Nexora's own replay.
func (s *Live) NativeTarget() string { return Kind + ":" + s.Base }

// nexoraCursor says which records a read has already covered: everything
// failed later than last, the ids read at last itself (ties), and records
// without a failure time by id.
type nexoraCursor struct {
	started bool
	last    time.Time
	tie     map[string]bool
	noTime  map[string]bool
}

func (c *nexoraCursor) covered(e *entry.Entry) bool {
	if e.LastFailure.IsZero() {
		return c.noTime[e.ID]
	}
	if !c.started {
		return false
	}
	return e.LastFailure.After(c.last) || (e.LastFailure.Equal(c.last) && c.tie[e.ID])
}

func (c *nexoraCursor) add(e *entry.Entry) {
	switch {
	case e.LastFailure.IsZero():
		if c.noTime == nil {
			c.noTime = map[string]bool{}
		}
		c.noTime[e.ID] = true
	case !c.started || !e.LastFailure.Equal(c.last):
		c.started, c.last, c.tie = true, e.LastFailure, map[string]bool{e.ID: true}
	default:
		c.tie[e.ID] = true
	}
}

func (s *Live) nexoraURL(page, size int) string {
	q := url.Values{"state": {"PENDING"}, "page": {strconv.Itoa(page)}, "size": {strconv.Itoa(size)}}
	return s.Base + "/api/dead-letters?" + q.Encode()
}

// nexoraPage fetches one page and decodes its records.
func (s *Live) nexoraPage(ctx context.Context, page, size int) ([]entry.Entry, error) {
	u := s.nexoraURL(page, size)
	body, err := s.Get(ctx, u)
	if err != nil {
		return nil, err
	}
	var out []entry.Entry
	rr := records.Reader{Format: Format(), Name: u, R: bytes.NewReader(body), MaxLine: records.MaxRecord, Live: true}
	rr.Each(ctx, func(e entry.Entry, rerr error) bool {
		if rerr != nil {
			err = rerr
			return false
		}
		out = append(out, e)
		return true
	})
	return out, err
}

func (s *Live) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		var c nexoraCursor
		// Undecodable records have no failure time to keep a cursor on; a
		// page read again after a step back must not yield them twice.
		bad := map[string]bool{}
		read, requests := 0, 0
		page := 0
		// readBefore says whether the entry just before page is one already
		// read: if not, entries left PENDING and the rest moved up past the
		// page's start.
		readBefore := func(page int) (bool, error) {
			requests++
			probe, err := s.nexoraPage(ctx, page*pageSize-1, 1)
			if err != nil || len(probe) == 0 {
				return false, err
			}
			if probe[0].Undecodable() {
				return bad[probe[0].ID], nil
			}
			return c.covered(&probe[0]), nil
		}
		for {
			requests++
			if limit := 4*(read/pageSize+1) + 100; requests > limit {
				yield(entry.Entry{}, fmt.Errorf("read nexora source %s: the dead letters changed faster than they could be read (%d requests for %d entries); the next run reads on", s.Base, requests, read))
				return
			}
			items, err := s.nexoraPage(ctx, page, pageSize)
			// Right after the page, check that the entry just before it is
			// one already read: if entries left PENDING since the page
			// before was read (replayed or resolved meanwhile), the rest
			// moved up past this page's start, and the entries between
			// were not read (found in review: 10 of 250 when 5 left
			// before each page).
			moved := false
			if err == nil && page > 0 {
				ok, cerr := readBefore(page)
				if cerr != nil {
					yield(entry.Entry{}, cerr)
					return
				}
				moved = !ok
			}
			if moved {
				// This page starts past entries not read: read none of
				// it (the cursor would pass them), step back to the first
				// page whose previous entry was read (one-entry checks),
				// and read on from there.
				for page--; page > 0; page-- {
					ok, cerr := readBefore(page)
					if cerr != nil {
						yield(entry.Entry{}, cerr)
						return
					}
					if ok {
						break
					}
				}
				continue
			}
			for i := range items {
				e := &items[i]
				if e.Undecodable() {
					if bad[e.ID] {
						continue
					}
					bad[e.ID] = true
				} else {
					if c.covered(e) {
						continue
					}
					c.add(e)
				}
				read++
				if !yield(*e, nil) {
					return
				}
			}
			if err != nil {
				yield(entry.Entry{}, err)
				return
			}
			if len(items) < pageSize {
				return
			}
			page++
		}
	}
}

// Settle resolves the dead letter the way Nexora itself does: POST
// /api/dead-letters/{id}/resolve {"reason"} (ObserveCommand.java), the
// reason "replayed by replayctl" for a replay or a person's resolve
// reason, which Nexora keeps on the record. One already gone (404) or no
// longer PENDING (409) is not an error.
func (s *Live) Settle(ctx context.Context, e *entry.Entry, st connector.Settlement) error {
	reason := st.Reason
	if st.Replayed {
		reason = "replayed by replayctl"
	}
	body, err := json.Marshal(map[string]string{"reason": reason})
	if err != nil {
		return err
	}
	return s.SettleRequest(ctx, e.ID, http.MethodPost, s.Base+"/api/dead-letters/"+url.PathEscape(e.ID)+"/resolve", body)
}

var _ connector.Settler = (*Live)(nil)

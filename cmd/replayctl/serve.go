package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/maintenance"
	"github.com/replayctl/replayctl/internal/notify"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

func newServeCmd(s *streams) *cobra.Command {
	var (
		addr, tokensPath string
		every            time.Duration
		eng              engineFlags
		src              sourceFlags
		db               dbFlags
		tgt              targetFlags
		approvers        approversFlag
		par              int
		rate             float64
	)
	var (
		tlsCert, tlsKey, proxyDefault string
		trustedProxies, proxyRoles    []string
		proxyApprovers                []string
		hooksJSON, hooksSlack         []string
		publicURL                     string
		agingAfter, agingEvery        time.Duration
		prune                         servePrune
		candidates                    []server.BacktestCandidate
	)
	cmd := &cobra.Command{
		Use:   "serve --addr 127.0.0.1:8080 --source KIND:PATH... [--every 5m] [--db F] [--tokens F]",
		Short: "Run as a service: scheduled reconcile, REST API, approval web UI, metrics",
		Long: `serve owns the state file and runs reconcile on a schedule (--every; a run that
would overlap the previous one is skipped and counted, never stacked). It serves:

  /api/...   the REST API (Nexora-compatible /api/dead-letters, plan, reconcile
             runs, approvals, audit), JSON, bearer tokens (replayctl tokens create)
  /          the approval web UI (log in with a token; forms are CSRF-protected)
  /metrics   Prometheus metrics;  /healthz and /readyz

Rules and policies are re-read for every run, so edits apply without a restart.
Background duties run beside it, each logged as it starts and stops:
recovery of interrupted dispatches (bbolt), the audit sealer (PostgreSQL),
approval reminders (--notify-aging) and retention (--prune-every); see
docs/maintenance.md. SIGTERM stops the schedule, lets a run in progress
finish its in-flight dispatches (or record them outcome_unknown), stops the
duties in reverse order, and exits.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every < 0 {
				return usageError("--every must not be negative")
			}
			if (tlsCert == "") != (tlsKey == "") {
				return usageError("--tls-cert and --tls-key go together")
			}
			if err := refuseIgnored(cmd, s, "serve", "serve is the server and holds the state itself", "server", "token"); err != nil {
				return err
			}
			if agingAfter < 0 || agingEvery < 0 {
				return usageError("--notify-aging and --notify-aging-every must not be negative")
			}
			if agingAfter > 0 && len(hooksJSON)+len(hooksSlack) == 0 {
				return usageError("--notify-aging needs a --notify-webhook or --notify-slack to send reminders to")
			}
			proxy, err := proxyAuth(trustedProxies, proxyRoles, proxyApprovers, proxyDefault)
			if err != nil {
				return usageError("%v", err)
			}
			srcs, err := src.open(s.log)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if _, _, err := eng.load(ctx); err != nil {
				return err
			}
			cfg, err := approval.LoadConfig(approvers.path)
			if err != nil {
				return err
			}
			tokens, err := server.LoadTokens(tokensPath)
			if err != nil {
				return err
			}
			auditKey, err := db.key.key()
			if err != nil {
				return err
			}
			st, err := db.open()
			if err != nil {
				return err
			}
			defer st.Close()
			source.KeepStoredNames(srcs, storedRef(st))
			pruned, err := prune.check(st)
			if err != nil {
				return err
			}
			logger := s.log
			duties := maintenance.NewGroup(logger)
			srv, err := server.New(server.Config{Maintenance: duties,
				Store: st, Tokens: tokens, Sources: srcs, Approvers: cfg, Every: every,
				MaxParallel: par, Rate: rate, Logger: logger, AuditKey: auditKey, Proxy: proxy, ForEntry: forEntry(),
				Notify: notifier(hooksJSON, hooksSlack), PublicURL: publicURL, BacktestCandidates: candidates,
				Remind:      notify.Aging{After: agingAfter, Every: agingEvery},
				Engine:      func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) { return eng.load(ctx) },
				ConfigFiles: []string{eng.rules, eng.policies},
				Router:      func(rules *triage.Rules) replay.Router { return tgt.router(rules, srcs...) },
			})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return &exitErr{code: exitError, err: fmt.Errorf("listen on %s: %w", addr, err)}
			}
			srv.SetBase(ctx)
			if err := (serveDuties{st: st, every: every, remind: agingAfter > 0, pruned: pruned, prune: prune,
				rules: eng.rules, auditKey: auditKey, log: logger}).build(duties, srv); err != nil {
				return err
			}
			// The duties stop with ctx (SIGTERM) and are waited for in
			// reverse order below; an error return stops them too.
			if err := duties.Start(ctx); err != nil {
				return err
			}
			defer duties.Stop()
			hs := srv.HTTPServer()
			if hs.ErrorLog == nil {
				// net/http's own errors (TLS handshakes refused, ...) go
				// through --log-format like every other line.
				hs.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
			}
			errc := make(chan error, 1)
			go func() {
				if tlsCert != "" {
					errc <- hs.ServeTLS(ln, tlsCert, tlsKey)
					return
				}
				errc <- hs.Serve(ln)
			}()
			logger.Info("replayctl serving", "addr", ln.Addr().String(), "every", every.String(), "db", db.path)
			scheme := "http"
			if tlsCert != "" {
				scheme = "https"
			}
			fmt.Fprintf(s.out, "listening on %s://%s\n", scheme, ln.Addr())
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			logger.Info("shutting down: finishing the run in progress")
			shut, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = hs.Shutdown(shut)
			srv.Wait()
			duties.Stop()
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	f.DurationVar(&every, "every", 5*time.Minute, "reconcile every this long (0: only when asked through the API)")
	f.StringVar(&tokensPath, "tokens", "tokens.json", "token file (replayctl tokens create writes it)")
	src.register(f)
	eng.register(f, s.err)
	db.register(f)
	approvers.register(f)
	f.Var(targetURL{&tgt.url}, "target", "send every replay to this URL, overriding rules.yaml targets")
	f.Var(httpURL{&tgt.probe}, "probe", "with --target: URL for compensating reads")
	f.IntVar(&par, "max-parallel", 5, "entries handled at once per run")
	f.Float64Var(&rate, "rate", 0, "at most this many dispatches per second to each destination (0: no limit)")
	f.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key)")
	f.StringVar(&tlsKey, "tls-key", "", "private key of --tls-cert (PEM)")
	f.StringArrayVar(&trustedProxies, "trusted-proxy", nil, "accept X-Forwarded-User/X-Forwarded-Groups from this address or CIDR (repeatable; e.g. the oauth2-proxy pod network)")
	f.StringArrayVar(&proxyRoles, "proxy-role", nil, "map a proxy group to a role, GROUP=ROLE (repeatable)")
	f.StringArrayVar(&proxyApprovers, "proxy-approver-group", nil, "a proxy group's members may decide an approvers.yaml group's requests, PROXY_GROUP=APPROVER_GROUP (repeatable)")
	f.StringVar(&proxyDefault, "proxy-default-role", "", "role of a proxy user in no mapped group (empty: refused)")
	f.StringArrayVar(&hooksJSON, "notify-webhook", nil, "POST a JSON message here when a run opens approvals (repeatable)")
	f.StringArrayVar(&hooksSlack, "notify-slack", nil, "Slack-compatible incoming webhook to tell approvers (repeatable)")
	f.DurationVar(&agingAfter, "notify-aging", 0, "remind approvers (through the webhooks) of requests pending longer than this, after a run (e.g. 4h; 0: never)")
	f.DurationVar(&agingEvery, "notify-aging-every", 0, "remind of a request still pending at most once per this long (default: --notify-aging)")
	f.Var(candidatesFlag{&candidates}, "backtest-candidate", "candidate rules and policies the console's backtest page offers, NAME=RULES_FILE[,POLICY_DIR] (repeatable)")
	f.StringVar(&publicURL, "public-url", "http://localhost:8080", "this server's address as people reach it, for links in notifications")
	prune.register(f)
	return cmd
}

// notifier delivers approver notifications in the background: 5 attempts,
// backoff from 2s doubling, a failure metered, never blocking a run.
func notifier(jsonHooks, slackHooks []string) *notify.Notifier {
	if len(jsonHooks)+len(slackHooks) == 0 {
		return nil
	}
	n := &notify.Notifier{Attempts: 5, Backoff: 2 * time.Second, Sleep: func(ctx context.Context, d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}}
	for _, u := range jsonHooks {
		n.Hooks = append(n.Hooks, notify.Webhook{URL: u, Format: "json"})
	}
	for _, u := range slackHooks {
		n.Hooks = append(n.Hooks, notify.Webhook{URL: u, Format: "slack"})
	}
	return n
}

// proxyAuth builds the trusted-proxy configuration from the flags.
func proxyAuth(trusted, roles, approvers []string, def string) (*server.ProxyAuth, error) {
	if len(trusted) == 0 {
		if len(roles)+len(approvers) > 0 || def != "" {
			return nil, errors.New("--proxy-role, --proxy-approver-group and --proxy-default-role need --trusted-proxy")
		}
		return nil, nil
	}
	p := &server.ProxyAuth{DefaultRole: def}
	for _, t := range trusted {
		pf, err := netip.ParsePrefix(t)
		if err != nil {
			a, aerr := netip.ParseAddr(t)
			if aerr != nil {
				return nil, fmt.Errorf("--trusted-proxy %q: want an address or CIDR", t)
			}
			pf = netip.PrefixFrom(a, a.BitLen())
		}
		p.Trusted = append(p.Trusted, pf)
	}
	m, err := server.ParseRoleMapping(roles)
	if err != nil {
		return nil, err
	}
	if _, err := server.ParseRoleMapping([]string{"x=" + def}); def != "" && err != nil {
		return nil, fmt.Errorf("--proxy-default-role %q: want viewer, operator, approver or admin", def)
	}
	p.Roles = m
	if p.ApproverGroups, err = server.ParseApproverGroupMapping(approvers); err != nil {
		return nil, err
	}
	return p, nil
}

func newTokensCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{Use: "tokens", Short: "Manage API tokens (stored hashed): create, list, revoke"}
	var path, usr, role, outF string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create --user U --role viewer|operator|approver|admin [--expires-in 720h] [--tokens tokens.json] [-o json]",
		Short: "Create a token; it is printed once, only its hash is stored",
		Long: `Roles: viewer reads; operator also reconciles, replays, resolves and releases;
approver reads and decides approvals for the groups it belongs to (approvers.yaml,
by user name); admin does everything. The four-eyes rule holds for every role.
A running serve re-reads the token file when it changes: a new token works, and
a revoked or expired one is refused, without a restart.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			tokens, err := server.LoadTokens(path)
			if err != nil {
				return err
			}
			secret, tok, err := tokens.Issue(usr, role, time.Now(), ttl)
			if err != nil {
				return usageError("%v", err)
			}
			if format == "json" {
				return writeJSON(s.out, struct {
					Token   string     `json:"token"`
					ID      string     `json:"id"`
					User    string     `json:"user"`
					Role    string     `json:"role"`
					Expires *time.Time `json:"expires,omitempty"`
				}{secret, tok.ID, usr, role, tok.Expires})
			}
			fmt.Fprintln(s.out, secret)
			return nil
		},
	}
	create.Flags().StringVar(&path, "tokens", "tokens.json", "token file")
	create.Flags().StringVar(&usr, "user", "", "user the token acts as (required)")
	create.Flags().StringVar(&role, "role", "viewer", "viewer, operator, approver or admin")
	create.Flags().DurationVar(&ttl, "expires-in", 0, "the token stops working this long after creation (e.g. 720h; 0: never)")
	create.Flags().StringVarP(&outF, "output", "o", "table", "output format: table (the token alone) or json")

	list := &cobra.Command{
		Use:   "list [--tokens tokens.json] [-o json]",
		Short: "List tokens: id, user, role, created, expires, status (active, expired, revoked); never a secret",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			tokens, err := server.LoadTokens(path)
			if err != nil {
				return err
			}
			all, err := tokens.List()
			if err != nil {
				return err
			}
			now := time.Now()
			type row struct {
				server.Token
				Hash   string `json:"sha256,omitempty"`
				Status string `json:"status"`
			}
			rows := make([]row, 0, len(all))
			for _, t := range all {
				rows = append(rows, row{Token: t, Status: t.Status(now)})
			}
			if format == "json" {
				return writeJSON(s.out, rows)
			}
			tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tUSER\tROLE\tCREATED\tEXPIRES\tSTATUS")
			for _, r := range rows {
				exp := "never"
				if r.Expires != nil {
					exp = r.Expires.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.User, r.Role, r.Created.Format(time.RFC3339), exp, r.Status)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "%d token(s)\n", len(rows))
			return nil
		},
	}
	list.Flags().StringVar(&path, "tokens", "tokens.json", "token file")
	list.Flags().StringVarP(&outF, "output", "o", "table", "output format: table or json")

	revoke := &cobra.Command{
		Use:   "revoke ID [--tokens tokens.json]",
		Short: "Revoke a token (by its id from tokens list); a running serve refuses it from the next request on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tokens, err := server.LoadTokens(path)
			if err != nil {
				return err
			}
			tok, err := tokens.Revoke(args[0], time.Now())
			if errors.Is(err, server.ErrTokenNotFound) {
				return usageError("%v", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(s.out, "%s (%s, %s) revoked at %s\n", tok.ID, tok.User, tok.Role, tok.Revoked.Format(time.RFC3339))
			return nil
		},
	}
	revoke.Flags().StringVar(&path, "tokens", "tokens.json", "token file")
	cmd.AddCommand(create, list, revoke)
	return cmd
}

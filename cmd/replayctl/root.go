package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/buildinfo"
	"github.com/replayctl/replayctl/internal/config"
	"github.com/replayctl/replayctl/internal/logging"
)

type streams struct {
	in       io.Reader
	out, err io.Writer
	// log is built from --log-format and --log-level before any command
	// runs; it writes to err, never to out (which carries command output).
	log *slog.Logger
	// cfg is the config file and environment, applied to the flags.
	cfg *config.Config
}

func newRootCmd(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "replayctl",
		Short: "Policy-driven replay controller for dead-letter queues",
		Long: `replayctl drains dead-letter queues safely: it classifies every dead-lettered
entry (transient, poison, governance, unknown_commit), decides with rules.yaml
and a Rego policy whether to replay it, quarantine it or ask a person, and
replays through an idempotency ledger so that nothing is delivered twice.

Sources are given as KIND:PATH, with KIND one of cordum, cordum-redis, prodigy,
nexora, jsonl. State is a bbolt file (--db, default replayctl.db), PostgreSQL
for many workers (--store), or a running server (--server).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints the same text as `replayctl version`.
		Version: buildinfo.Get().Version,
	}
	root.SetVersionTemplate(versionText(buildinfo.Get()))
	// --cpuprofile writes a pprof CPU profile of the command (hidden: for
	// performance work, `go tool pprof replayctl FILE`).
	var cpuprofile string
	var stopProfile func()
	root.PersistentFlags().StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile to this file")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	var logFormat, logLevel, configPath string
	root.PersistentFlags().StringVar(&configPath, "config", "", "configuration file (replayctl.yaml; or REPLAYCTL_CONFIG): keys are flag names; precedence flag > REPLAYCTL_<FLAG> env > file > default")
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: "+logging.Formats)
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: "+logging.Levels)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := config.Load(configPath, os.Environ())
		if err != nil {
			return usageError("%v", err)
		}
		if err := cfg.Check(flagNames(root)); err != nil {
			return usageError("%v", err)
		}
		if err := cfg.Apply(cmd.Flags()); err != nil {
			return usageError("%v", err)
		}
		s.cfg = cfg
		log, err := logging.New(s.err, logFormat, logLevel)
		if err != nil {
			return usageError("%v", err)
		}
		s.log = log
		if cpuprofile == "" {
			return nil
		}
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
		return nil
	}
	root.PersistentPostRun = func(*cobra.Command, []string) {
		if stopProfile != nil {
			stopProfile()
		}
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v%s\nRun '%s --help' for usage.", err, suggestFlag(c, err), c.CommandPath())
	})
	defer usageArgs(root)
	root.AddCommand(
		newPlanCmd(s),
		newRulesCmd(s),
		newPolicyCmd(s),
		newReconcileCmd(s),
		newDLQCmd(s),
		newRunsCmd(s),
		newGroupsCmd(s),
		newApprovalsCmd(s),
		newAuditCmd(s),
		newStoreCmd(s),
		newStatsCmd(s),
		newServeCmd(s),
		newTokensCmd(s),
		newBenchCmd(s),
		newGenCmd(s),
		newVersionCmd(s),
		newConfigCmd(s),
	)
	registerCompletions(root)
	return root
}

// noArgs rejects positional arguments with a usage error.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments, got %q\nRun '%s --help' for usage.", c.CommandPath(), args, c.CommandPath())
	}
	return nil
}

// usageArgs makes every command's argument-count error a usage error
// (exit 2), as flag errors are.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var ee *exitErr
			if err == nil || errors.As(err, &ee) {
				return err
			}
			return usageError("%v\nRun '%s --help' for usage.", err, cmd.CommandPath())
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

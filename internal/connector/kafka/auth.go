package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The spec's security options: tls=1 (TLS, the system's roots or
// tls_ca=FILE, a PEM bundle to trust instead) and sasl=plain,
// scram-sha-256 or scram-sha-512, whose user and password come from
// KAFKA_USERNAME and KAFKA_PASSWORD only: a spec is printed, stored as
// an entry's Origin and audited, so it never holds a credential.
const (
	envUser = "KAFKA_USERNAME"
	envPass = "KAFKA_PASSWORD"
)

// security is how the connector's clients connect.
type security struct {
	tls        bool
	ca         string // tls_ca: a PEM file of roots to trust ("": the system's)
	mechanism  string // sasl, as given ("": none)
	user, pass string
}

// parseSecurity reads the security options of a spec's query.
func parseSecurity(q url.Values, getenv func(string) string) (security, error) {
	var s security
	switch v := q.Get("tls"); v {
	case "", "0", "false":
	case "1", "true":
		s.tls = true
	default:
		return s, fmt.Errorf("tls=%q: want tls=1", v)
	}
	s.ca = q.Get("tls_ca")
	if s.ca != "" && !s.tls {
		return s, errors.New("tls_ca without tls=1")
	}
	switch m := strings.ToLower(q.Get("sasl")); m {
	case "":
		return s, nil
	case "plain", "scram-sha-256", "scram-sha-512":
		s.mechanism = m
	default:
		return s, fmt.Errorf("sasl=%q: want plain, scram-sha-256 or scram-sha-512", q.Get("sasl"))
	}
	if s.mechanism == "plain" && !s.tls {
		// PLAIN sends the password as it is: never over a plaintext
		// connection.
		return s, errors.New("sasl=plain sends the password in clear: add tls=1 (or use sasl=scram-sha-256 / scram-sha-512)")
	}
	s.user, s.pass = getenv(envUser), getenv(envPass)
	if s.user == "" || s.pass == "" {
		return s, fmt.Errorf("sasl=%s needs %s and %s in the environment (a spec never holds credentials)", s.mechanism, envUser, envPass)
	}
	return s, nil
}

// query adds the options to an Origin's query: the same connector opens
// again from it, with the credentials from the environment.
func (s security) query(q url.Values) {
	if s.tls {
		q.Set("tls", "1")
	}
	if s.ca != "" {
		q.Set("tls_ca", s.ca)
	}
	if s.mechanism != "" {
		q.Set("sasl", s.mechanism)
	}
}

// opts are the client options every client of the connector starts with.
func (c *Conn) opts() ([]kgo.Opt, error) {
	o := []kgo.Opt{kgo.SeedBrokers(c.brokers...), kgo.DialTimeout(10 * time.Second)}
	s := c.sec
	if s.tls {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.ca != "" {
			pem, err := os.ReadFile(s.ca)
			if err != nil {
				return nil, fmt.Errorf("tls_ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("tls_ca %s holds no PEM certificate", s.ca)
			}
		}
		// kgo clones it per dial and sets ServerName to the host it
		// dials: each broker is verified against its own name.
		o = append(o, kgo.DialTLSConfig(cfg))
	}
	if s.mechanism != "" {
		var m sasl.Mechanism
		switch s.mechanism {
		case "plain":
			m = plain.Auth{User: s.user, Pass: s.pass}.AsMechanism()
		case "scram-sha-256":
			m = scram.Auth{User: s.user, Pass: s.pass}.AsSha256Mechanism()
		case "scram-sha-512":
			m = scram.Auth{User: s.user, Pass: s.pass}.AsSha512Mechanism()
		}
		o = append(o, kgo.SASL(m))
	}
	return o, nil
}

// redact keeps the password out of an error's text.
func (c *Conn) redact(err error) error {
	if err == nil || c.sec.pass == "" || !strings.Contains(err.Error(), c.sec.pass) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), c.sec.pass, "xxxxx"))
}

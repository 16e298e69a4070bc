package kafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/replayctl/replayctl/internal/connector"
)

const (
	saslUser = "replayctl"
	saslPass = "s3cret-do-not-print"
)

func env(user, pass string) func(string) string {
	return func(k string) string {
		return map[string]string{envUser: user, envPass: pass}[k]
	}
}

// selfSigned is a certificate for 127.0.0.1 and the PEM file of it, the
// root a client trusts through tls_ca.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca
}

// A cluster that wants SASL (SCRAM without TLS, PLAIN over TLS, as
// kfake's EnableSASL/Superuser and TLS options set them up): the
// connector reads and replays with the credentials from the environment;
// a wrong password fails the read without printing it; the Origin keeps
// the options and never the credentials.
func TestSASLAndTLS(t *testing.T) {
	ctx := context.Background()
	cert, ca := selfSigned(t)
	for _, c := range []struct {
		name, method, query string
		opts                []kfake.Opt
		app                 kgo.Opt
		tls                 bool
	}{
		{"scram-sha-256", "SCRAM-SHA-256", "sasl=scram-sha-256", nil,
			kgo.SASL(scram.Auth{User: saslUser, Pass: saslPass}.AsSha256Mechanism()), false},
		{"scram-sha-512", "SCRAM-SHA-512", "sasl=SCRAM-SHA-512", nil,
			kgo.SASL(scram.Auth{User: saslUser, Pass: saslPass}.AsSha512Mechanism()), false},
		{"plain over tls", "PLAIN", "tls=1&tls_ca=" + ca + "&sasl=plain",
			[]kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}})},
			kgo.SASL(plain.Auth{User: saslUser, Pass: saslPass}.AsMechanism()), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := kfake.NewCluster(append(c.opts, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(c.method, saslUser, saslPass),
				kfake.SeedTopics(1, "orders", "orders.DLT"))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			addr := cl.ListenAddrs()[0]
			appOpts := []kgo.Opt{kgo.SeedBrokers(addr), c.app}
			if c.tls {
				pool := x509.NewCertPool()
				pool.AddCert(mustParse(t, cert.Certificate[0]))
				appOpts = append(appOpts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool}))
			}
			app, err := kgo.NewClient(appOpts...)
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close()
			if err := app.ProduceSync(ctx, springDLT("k1", `{"o":1}`, 0, 1, "x.W", "java.net.SocketTimeoutException", "Read timed out")).FirstErr(); err != nil {
				t.Fatal(err)
			}
			spec := "kafka:" + addr + "?topic=orders.DLT&group=g&wait=2s&" + c.query

			bad, err := OpenEnv(spec, env(saslUser, "wrong-"+saslPass))
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range bad.Entries(ctx) {
				if err == nil {
					t.Fatal("read with a wrong password")
				}
				if strings.Contains(err.Error(), saslPass) {
					t.Fatalf("the error shows the password: %v", err)
				}
				break
			}
			bad.Close()

			conn, err := OpenEnv(spec, env(saslUser, saslPass))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			got := readAll(t, conn)
			if len(got) != 1 {
				t.Fatalf("read %d", len(got))
			}
			if res := conn.Replay(ctx, connector.Request{Entry: &got[0], Key: got[0].IdempotencyKey, Attempt: 1}); res.Outcome != connector.Succeeded {
				t.Fatalf("replay: %v %s", res.Outcome, res.Detail)
			}
			o := conn.Origin()
			if strings.Contains(o, saslUser) || strings.Contains(o, saslPass) || !strings.Contains(o, "sasl=") {
				t.Errorf("Origin %q: want the options, never the credentials", o)
			}
			if again, err := OpenEnv(o, env(saslUser, saslPass)); err != nil || again.Origin() != o {
				t.Errorf("Origin %q does not open the same connector again: %v", o, err)
			}
		})
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSecuritySpecErrors(t *testing.T) {
	for _, c := range []struct{ query, user, pass, want string }{
		{"sasl=plain", saslUser, saslPass, "tls=1"},
		{"sasl=scram-sha-256", "", "", "KAFKA_USERNAME and KAFKA_PASSWORD"},
		{"sasl=gssapi", saslUser, saslPass, "want plain, scram-sha-256 or scram-sha-512"},
		{"tls=yes", "", "", "want tls=1"},
		{"tls_ca=/x.pem", "", "", "without tls=1"},
	} {
		_, err := OpenEnv("kafka:127.0.0.1:9092?topic=t&group=g&"+c.query, env(c.user, c.pass))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.query, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), saslPass) {
			t.Errorf("%s: the error shows the password", c.query)
		}
	}
}

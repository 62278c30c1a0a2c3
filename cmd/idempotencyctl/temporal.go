package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// The connection flags of the commands that talk to Temporal, spelled as
// the temporal CLI spells them, with its environment variables.
const (
	envTemporalAddress        = "TEMPORAL_ADDRESS"
	envTemporalNamespace      = "TEMPORAL_NAMESPACE"
	envTemporalAPIKey         = "TEMPORAL_API_KEY"
	envTemporalTLS            = "TEMPORAL_TLS"
	envTemporalTLSCert        = "TEMPORAL_TLS_CERT"
	envTemporalTLSKey         = "TEMPORAL_TLS_KEY"
	envTemporalTLSCA          = "TEMPORAL_TLS_CA"
	envTemporalTLSServerName  = "TEMPORAL_TLS_SERVER_NAME"
	envTemporalTLSNoHostCheck = "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"

	defaultTemporalAddress   = "127.0.0.1:7233"
	defaultTemporalNamespace = "default"
)

// temporalFlags are the connection flags as parsed; connect fills what was
// left unset from the environment.
type temporalFlags struct {
	fs             *flag.FlagSet
	env            func(string) string
	address        *string
	namespace      *string
	apiKey         *string
	tls            *bool
	certPath       *string
	keyPath        *string
	caPath         *string
	serverName     *string
	noHostChecking *bool
}

func defineTemporalFlags(fs *flag.FlagSet, env func(string) string) *temporalFlags {
	return &temporalFlags{
		fs:             fs,
		env:            env,
		address:        fs.String("address", defaultTemporalAddress, "Temporal frontend host:port (or $"+envTemporalAddress+")"),
		namespace:      fs.String("namespace", defaultTemporalNamespace, "Temporal namespace of the workflow (or $"+envTemporalNamespace+")"),
		apiKey:         fs.String("api-key", "", "API key for the requests; implies -tls (or $"+envTemporalAPIKey+")"),
		tls:            fs.Bool("tls", false, "connect with TLS; implied by the other -tls flags and -api-key, -tls=false refuses it (or $"+envTemporalTLS+")"),
		certPath:       fs.String("tls-cert-path", "", "client x509 certificate, for mTLS; needs -tls-key-path (or $"+envTemporalTLSCert+")"),
		keyPath:        fs.String("tls-key-path", "", "client private key, for mTLS; needs -tls-cert-path (or $"+envTemporalTLSKey+")"),
		caPath:         fs.String("tls-ca-path", "", "CA certificate that signed the server's (or $"+envTemporalTLSCA+")"),
		serverName:     fs.String("tls-server-name", "", "server name to expect in the server's certificate (or $"+envTemporalTLSServerName+")"),
		noHostChecking: fs.Bool("tls-disable-host-verification", false, "accept any server certificate name (or $"+envTemporalTLSNoHostCheck+")"),
	}
}

// temporalConfig is what the flags and the environment say, checked.
type temporalConfig struct {
	address, namespace, apiKey string
	tls                        *tls.Config // nil: plain text
}

// resolve fills unset flags from the environment, checks them and loads the
// TLS files. Every mistake is a usage error: nothing was contacted.
func (f *temporalFlags) resolve() (temporalConfig, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	str := func(flagName string, v *string, envName string) {
		if !set[flagName] {
			if e := f.env(envName); e != "" {
				*v = e
			}
		}
	}
	str("address", f.address, envTemporalAddress)
	str("namespace", f.namespace, envTemporalNamespace)
	str("api-key", f.apiKey, envTemporalAPIKey)
	str("tls-cert-path", f.certPath, envTemporalTLSCert)
	str("tls-key-path", f.keyPath, envTemporalTLSKey)
	str("tls-ca-path", f.caPath, envTemporalTLSCA)
	str("tls-server-name", f.serverName, envTemporalTLSServerName)
	tlsExplicit := set["tls"]
	for _, b := range []struct {
		flagName, envName string
		v                 *bool
		explicit          *bool
	}{
		{"tls", envTemporalTLS, f.tls, &tlsExplicit},
		{"tls-disable-host-verification", envTemporalTLSNoHostCheck, f.noHostChecking, nil},
	} {
		if set[b.flagName] {
			continue
		}
		e := f.env(b.envName)
		if e == "" {
			continue
		}
		v, err := strconv.ParseBool(e)
		if err != nil {
			return temporalConfig{}, fmt.Errorf("$%s is %s, not true or false", b.envName, strconv.Quote(e))
		}
		*b.v = v
		if b.explicit != nil {
			*b.explicit = true
		}
	}

	cfg := temporalConfig{address: *f.address, namespace: *f.namespace, apiKey: *f.apiKey}
	switch {
	case cfg.address == "":
		return cfg, errors.New("-address is empty: give the Temporal frontend as host:port")
	case cfg.namespace == "":
		return cfg, errors.New("-namespace is empty: give the namespace the workflow runs in")
	case (*f.certPath == "") != (*f.keyPath == ""):
		return cfg, errors.New("-tls-cert-path and -tls-key-path go together: mTLS needs both the certificate and its key")
	}
	implied := *f.certPath != "" || *f.caPath != "" || *f.serverName != "" || *f.noHostChecking || cfg.apiKey != ""
	if tlsExplicit && !*f.tls {
		if implied {
			return cfg, errors.New("-tls=false contradicts the other -tls flags or -api-key given: drop one")
		}
		return cfg, nil
	}
	if !*f.tls && !implied {
		return cfg, nil
	}
	cfg.tls = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         *f.serverName,
		InsecureSkipVerify: *f.noHostChecking, // the operator asked for it by name
	}
	if *f.certPath != "" {
		pair, err := tls.LoadX509KeyPair(*f.certPath, *f.keyPath)
		if err != nil {
			return cfg, fmt.Errorf("-tls-cert-path/-tls-key-path: %v", err)
		}
		cfg.tls.Certificates = []tls.Certificate{pair}
	}
	if *f.caPath != "" {
		pem, err := os.ReadFile(*f.caPath)
		if err != nil {
			return cfg, fmt.Errorf("-tls-ca-path: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return cfg, fmt.Errorf("-tls-ca-path %s holds no PEM certificate", strconv.Quote(*f.caPath))
		}
		cfg.tls.RootCAs = pool
	}
	return cfg, nil
}

// quietLogger drops the SDK's log lines: the command reports on its own, one
// line per error.
var quietLogger = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))

// dial connects to Temporal as cfg says, within ctx.
func (cfg temporalConfig) dial(ctx context.Context) (client.Client, error) {
	opts := client.Options{
		HostPort:          cfg.address,
		Namespace:         cfg.namespace,
		Logger:            quietLogger,
		ConnectionOptions: client.ConnectionOptions{TLS: cfg.tls},
	}
	if cfg.apiKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.apiKey)
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s): %w", cfg.address, cfg.namespace, err)
	}
	return c, nil
}

package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"
)

// The connection settings of the commands that talk to Temporal are the
// temporal CLI's, read by the SDK's own loader (envconfig): a profile of
// its TOML configuration file, then its environment variables, then the
// flags, each over the one before. So a shell whose temporal CLI reaches a
// cluster reaches it here with no flag.
const (
	envTemporalConfigFile     = "TEMPORAL_CONFIG_FILE"
	envTemporalProfile        = "TEMPORAL_PROFILE"
	envTemporalAddress        = "TEMPORAL_ADDRESS"
	envTemporalNamespace      = "TEMPORAL_NAMESPACE"
	envTemporalAPIKey         = "TEMPORAL_API_KEY"
	envTemporalTLS            = "TEMPORAL_TLS"
	envTemporalTLSCertPath    = "TEMPORAL_TLS_CLIENT_CERT_PATH"
	envTemporalTLSCertData    = "TEMPORAL_TLS_CLIENT_CERT_DATA"
	envTemporalTLSKeyPath     = "TEMPORAL_TLS_CLIENT_KEY_PATH"
	envTemporalTLSKeyData     = "TEMPORAL_TLS_CLIENT_KEY_DATA"
	envTemporalTLSCAPath      = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
	envTemporalTLSCAData      = "TEMPORAL_TLS_SERVER_CA_CERT_DATA"
	envTemporalTLSServerName  = "TEMPORAL_TLS_SERVER_NAME"
	envTemporalTLSNoHostCheck = "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"
	envTemporalGRPCMetaPrefix = "TEMPORAL_GRPC_META_"

	// The names idempotencyctl read before it followed the temporal CLI.
	// Each still applies when neither the CLI's path variable nor its data
	// variable is set, so no operator's setup breaks.
	envLegacyTLSCert = "TEMPORAL_TLS_CERT"
	envLegacyTLSKey  = "TEMPORAL_TLS_KEY"
	envLegacyTLSCA   = "TEMPORAL_TLS_CA"

	defaultTemporalAddress   = "127.0.0.1:7233"
	defaultTemporalNamespace = "default"
)

// temporalFlags are the connection flags as parsed; resolve lays them over
// the configuration file and the environment.
type temporalFlags struct {
	fs             *flag.FlagSet
	env            func(string) string
	configFile     *string
	profile        *string
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
		configFile:     fs.String("config-file", "", "the temporal CLI's TOML configuration file (or $"+envTemporalConfigFile+"; default temporalio/temporal.toml in the user's configuration directory)"),
		profile:        fs.String("profile", "", "profile of the configuration file (or $"+envTemporalProfile+`; default "`+envconfig.DefaultConfigFileProfile+`")`),
		address:        fs.String("address", "", "Temporal frontend host:port (or $"+envTemporalAddress+", or the profile's; default "+defaultTemporalAddress+")"),
		namespace:      fs.String("namespace", "", "Temporal namespace of the workflow (or $"+envTemporalNamespace+`, or the profile's; default "`+defaultTemporalNamespace+`")`),
		apiKey:         fs.String("api-key", "", "API key for the requests; implies TLS (or $"+envTemporalAPIKey+", or the profile's)"),
		tls:            fs.Bool("tls", false, "connect with TLS; implied by the other -tls flags and an API key, -tls=false refuses it (or $"+envTemporalTLS+")"),
		certPath:       fs.String("tls-cert-path", "", "client x509 certificate, for mTLS; needs -tls-key-path (or $"+envTemporalTLSCertPath+")"),
		keyPath:        fs.String("tls-key-path", "", "client private key, for mTLS; needs -tls-cert-path (or $"+envTemporalTLSKeyPath+")"),
		caPath:         fs.String("tls-ca-path", "", "CA certificate that signed the server's (or $"+envTemporalTLSCAPath+")"),
		serverName:     fs.String("tls-server-name", "", "server name to expect in the server's certificate (or $"+envTemporalTLSServerName+")"),
		noHostChecking: fs.Bool("tls-disable-host-verification", false, "accept any server certificate name (or $"+envTemporalTLSNoHostCheck+")"),
	}
}

// temporalConfig is what the configuration file, the environment and the
// flags say, checked.
type temporalConfig struct {
	address, namespace string
	// apiKey is the key the requests carry; empty for none. Never printed.
	apiKey string
	// from names where the settings came from, for messages: the profile
	// and file, when a profile applied.
	from string
	opts client.Options
}

// envLookup is the SDK's view of the command's environment. A variable set
// to the empty string counts as unset, as everywhere else in this command.
type envLookup func(string) string

// LookupEnv returns the variable's value, and whether it is set.
func (e envLookup) LookupEnv(k string) (string, bool) {
	v := e(k)
	return v, v != ""
}

// Environ lists the variables the SDK enumerates (gRPC metadata,
// TEMPORAL_GRPC_META_*): their names come from the process's environment,
// their values from e, which main makes os.Getenv.
func (e envLookup) Environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, envTemporalGRPCMetaPrefix) {
			if v := e(k); v != "" {
				out = append(out, k+"="+v)
			}
		}
	}
	return out
}

// envBool reads a boolean variable as the temporal CLI does (true, false,
// 1 or 0, in any case); anything else is refused rather than ignored.
func envBool(env func(string) string, name string) error {
	v := env(name)
	if v == "" {
		return nil
	}
	switch strings.ToLower(v) {
	case "1", "0", "true", "false":
		return nil
	}
	return fmt.Errorf("$%s is %s, not true or false", name, strconv.Quote(v))
}

// resolve loads the profile the configuration file holds, lays the
// environment over it and the flags over that, and checks the result,
// loading the TLS files. Every mistake is a usage error: nothing was
// contacted.
func (f *temporalFlags) resolve() (temporalConfig, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	env := envLookup(f.env)
	for _, n := range []string{envTemporalTLS, envTemporalTLSNoHostCheck} {
		if err := envBool(f.env, n); err != nil {
			return temporalConfig{}, err
		}
	}
	switch {
	case set["address"] && *f.address == "":
		return temporalConfig{}, errors.New("-address is empty: give the Temporal frontend as host:port")
	case set["namespace"] && *f.namespace == "":
		return temporalConfig{}, errors.New("-namespace is empty: give the namespace the workflow runs in")
	case set["tls"] && !*f.tls && (*f.certPath != "" || *f.keyPath != "" || *f.caPath != "" || *f.serverName != "" || *f.noHostChecking || *f.apiKey != ""):
		return temporalConfig{}, errors.New("-tls=false contradicts the other -tls flags or -api-key given: drop one")
	}

	prof, from, err := f.profileOf(env)
	if err != nil {
		return temporalConfig{}, err
	}
	if err := prof.ApplyEnvVars(env); err != nil {
		return temporalConfig{}, fmt.Errorf("the Temporal environment variables: %v", err)
	}
	// The names this command read before; the temporal CLI's win.
	for _, l := range []struct {
		legacy, path, data string
		apply              func(*envconfig.ClientConfigTLS, string)
	}{
		{envLegacyTLSCert, envTemporalTLSCertPath, envTemporalTLSCertData, func(t *envconfig.ClientConfigTLS, v string) { t.ClientCertPath = v }},
		{envLegacyTLSKey, envTemporalTLSKeyPath, envTemporalTLSKeyData, func(t *envconfig.ClientConfigTLS, v string) { t.ClientKeyPath = v }},
		{envLegacyTLSCA, envTemporalTLSCAPath, envTemporalTLSCAData, func(t *envconfig.ClientConfigTLS, v string) { t.ServerCACertPath = v }},
	} {
		if v := f.env(l.legacy); v != "" && f.env(l.path) == "" && f.env(l.data) == "" {
			l.apply(tlsOf(&prof), v)
		}
	}

	// The flags given win over everything. A flag that sets a file path
	// also drops the bytes a profile or variable gave for the same file.
	if set["address"] {
		prof.Address = *f.address
	}
	if set["namespace"] {
		prof.Namespace = *f.namespace
	}
	if set["api-key"] {
		prof.APIKey = *f.apiKey
	}
	if set["tls"] {
		tlsOf(&prof).Disabled = !*f.tls
	}
	if *f.certPath != "" {
		t := tlsOf(&prof)
		t.ClientCertPath, t.ClientCertData = *f.certPath, nil
	}
	if *f.keyPath != "" {
		t := tlsOf(&prof)
		t.ClientKeyPath, t.ClientKeyData = *f.keyPath, nil
	}
	if *f.caPath != "" {
		t := tlsOf(&prof)
		t.ServerCACertPath, t.ServerCACertData = *f.caPath, nil
	}
	if *f.serverName != "" {
		tlsOf(&prof).ServerName = *f.serverName
	}
	if set["tls-disable-host-verification"] && (*f.noHostChecking || prof.TLS != nil) {
		tlsOf(&prof).DisableHostVerification = *f.noHostChecking
	}

	if prof.Address == "" {
		prof.Address = defaultTemporalAddress
	}
	if prof.Namespace == "" {
		prof.Namespace = defaultTemporalNamespace
	}
	if err := checkTLS(prof.TLS); err != nil {
		return temporalConfig{}, err
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return temporalConfig{}, fmt.Errorf("the Temporal connection settings%s: %v", from, err)
	}
	return temporalConfig{address: opts.HostPort, namespace: opts.Namespace, apiKey: prof.APIKey, from: from, opts: opts}, nil
}

// tlsOf returns the profile's TLS settings, made when it has none: any TLS
// setting turns TLS on, as with the temporal CLI.
func tlsOf(p *envconfig.ClientConfigProfile) *envconfig.ClientConfigTLS {
	if p.TLS == nil {
		p.TLS = &envconfig.ClientConfigTLS{}
	}
	return p.TLS
}

// profileOf returns the profile of the configuration file the flags and the
// environment name, the zero profile when the file or the default profile
// does not exist, and where it came from for messages (", profile P of
// FILE", or empty). A profile named explicitly must exist.
func (f *temporalFlags) profileOf(env envLookup) (envconfig.ClientConfigProfile, string, error) {
	file, fileFrom := *f.configFile, "-config-file"
	if file == "" {
		file, fileFrom = f.env(envTemporalConfigFile), "$"+envTemporalConfigFile
	}
	if file == "" {
		file, fileFrom = envconfig.DefaultConfigFilePath(), "the default location"
	}
	name, nameFrom := *f.profile, "-profile"
	if name == "" {
		name, nameFrom = f.env(envTemporalProfile), "$"+envTemporalProfile
	}
	named := name != ""
	if !named {
		name = envconfig.DefaultConfigFileProfile
	}
	if file == "" {
		// No configuration directory: there is no default file.
		if named {
			return envconfig.ClientConfigProfile{}, "", fmt.Errorf("profile %q (%s) needs a Temporal configuration file: pass -config-file or set $%s", name, nameFrom, envTemporalConfigFile)
		}
		return envconfig.ClientConfigProfile{}, "", nil
	}
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) && fileFrom == "-config-file" {
		// Typed on the command line: a slip, not a machine without a file.
		// (A variable naming no file is ignored, as the temporal CLI does.)
		return envconfig.ClientConfigProfile{}, "", fmt.Errorf("-config-file %s does not exist", file)
	}
	conf, err := envconfig.LoadClientConfig(envconfig.LoadClientConfigOptions{ConfigFilePath: file, EnvLookup: env})
	if err != nil {
		return envconfig.ClientConfigProfile{}, "", fmt.Errorf("the Temporal configuration file %s (%s): %v", file, fileFrom, err)
	}
	p, ok := conf.Profiles[name]
	switch {
	case ok && p != nil:
		return *p, fmt.Sprintf(", profile %q of %s", name, file), nil
	case !named:
		return envconfig.ClientConfigProfile{}, "", nil
	}
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		return envconfig.ClientConfigProfile{}, "", fmt.Errorf("profile %q (%s) cannot be read: the Temporal configuration file %s (%s) does not exist", name, nameFrom, file, fileFrom)
	}
	have := make([]string, 0, len(conf.Profiles))
	for n := range conf.Profiles {
		have = append(have, strconv.Quote(n))
	}
	slices.Sort(have)
	profiles := "it has no profile"
	if len(have) > 0 {
		profiles = "it has " + strings.Join(have, ", ")
	}
	return envconfig.ClientConfigProfile{}, "", fmt.Errorf("profile %q (%s) is not in the Temporal configuration file %s (%s): %s", name, nameFrom, file, fileFrom, profiles)
}

// checkTLS refuses, with a message that says what to give, TLS settings
// the SDK would refuse in its own words: half a client key pair, and a CA
// file that holds no certificate.
func checkTLS(t *envconfig.ClientConfigTLS) error {
	if t == nil || t.Disabled {
		return nil
	}
	cert := t.ClientCertPath != "" || len(t.ClientCertData) > 0
	key := t.ClientKeyPath != "" || len(t.ClientKeyData) > 0
	if cert != key {
		return errors.New("the client certificate and its key go together (-tls-cert-path and -tls-key-path, $" +
			envTemporalTLSCertPath + " and $" + envTemporalTLSKeyPath + ", or the profile's): mTLS needs both")
	}
	if t.ServerCACertPath != "" && len(t.ServerCACertData) == 0 {
		pem, err := os.ReadFile(t.ServerCACertPath)
		if err != nil {
			return fmt.Errorf("the server CA certificate: %v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return fmt.Errorf("the server CA certificate %s holds no PEM certificate", strconv.Quote(t.ServerCACertPath))
		}
	}
	return nil
}

// quietLogger drops the SDK's log lines: the command reports on its own, one
// line per error.
var quietLogger = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))

// dial connects to Temporal as cfg says, within ctx.
func (cfg temporalConfig) dial(ctx context.Context) (client.Client, error) {
	opts := cfg.opts
	opts.Logger = quietLogger
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s%s): %w", cfg.address, cfg.namespace, cfg.from, err)
	}
	return c, nil
}

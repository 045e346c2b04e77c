module github.com/agentowl/agentowl

go 1.26.8

require (
	code.dny.dev/ssrf v0.3.0 // egress: the deny-list of non-public addresses, checked at dial time
	github.com/emersion/go-message v0.18.2 // email channels: streaming MIME parsing, transfer encodings, charsets, address and Message-ID headers
	github.com/emersion/go-smtp v0.25.1 // the inbound SMTP listener (ESMTP, STARTTLS, SIZE, line and recipient limits)
	github.com/getkin/kin-openapi v0.153.0 // tests: every HTTP response is validated against api/openapi.yaml (OpenAPI 3.1)
	github.com/google/cel-go v0.31.0 // policy conditions: a sandboxed, cost-limited expression language
	github.com/google/uuid v1.6.0 // AAP identifiers are UUIDs
	github.com/jackc/pgx/v5 v5.12.0 // PostgreSQL driver (database/sql adapter) and error codes
	github.com/pressly/goose/v3 v3.30.0 // embedded migrations per dialect, with a lock for replicas
	github.com/prometheus/client_golang v1.25.0 // /metrics
	github.com/spf13/cobra v1.10.2 // the CLI: commands, flags, help
	github.com/spf13/pflag v1.0.9 // serve's flags from the settings table (cobra's flag package)
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1 // tests: an independent check of our Standard Webhooks signatures
	go.yaml.in/yaml/v3 v3.0.6 // tests: compose.yaml's settings are checked against serve's settings table
	modernc.org/sqlite v1.62.0 // the default store: embedded SQLite without cgo
)

require (
	cel.dev/expr v0.25.1 // indirect
	github.com/antlr4-go/antlr/v4 v4.13.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/emersion/go-sasl v0.0.0-20241020182733-b788ff22d5a6 // indirect
	github.com/go-openapi/jsonpointer v0.22.5 // indirect
	github.com/go-openapi/swag/jsonname v0.25.5 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.23.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/exp v0.0.0-20261109185158-a52e3aef5920 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	modernc.org/libc v1.80.2 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)

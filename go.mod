module github.com/agentowl/agentowl

go 1.26.8

require (
	code.dny.dev/ssrf v0.3.0 // egress: the deny-list of non-public addresses, checked at dial time
	github.com/aws/aws-sdk-go-v2 v1.46.0 // S3 object storage of retained attachments: credentials, retries, the client's configuration types
	github.com/aws/aws-sdk-go-v2/config v1.33.3 // S3 object storage: credentials and region from the AWS environment (LoadDefaultConfig)
	github.com/aws/aws-sdk-go-v2/credentials v1.20.3 // S3 object storage: the role= option (assume a role through STS)
	github.com/aws/aws-sdk-go-v2/service/s3 v1.111.0 // S3 object storage: the S3 client (PutObject, ranged GetObject, ListObjectsV2, DeleteObject)
	github.com/aws/aws-sdk-go-v2/service/sts v1.49.0 // S3 object storage: the STS client of the role= option
	github.com/aws/smithy-go v1.28.1 // S3 object storage: the API error codes that say an object does not exist
	github.com/chromedp/cdproto v0.159.0 // tests: the typed DevTools protocol chromedp speaks (cookies of the console's browser tests)
	github.com/chromedp/chromedp v0.23.0 // tests: drives Chromium for the web console's browser tests
	github.com/emersion/go-message v0.18.2 // email channels: streaming MIME parsing, transfer encodings, charsets, address and Message-ID headers
	github.com/emersion/go-smtp v0.25.1 // the inbound SMTP listener (ESMTP, STARTTLS, SIZE, line and recipient limits)
	github.com/getkin/kin-openapi v0.153.0 // tests: every HTTP response is validated against api/openapi.yaml (OpenAPI 3.1)
	github.com/google/cel-go v0.31.0 // policy conditions: a sandboxed, cost-limited expression language
	github.com/google/uuid v1.6.0 // AAP identifiers are UUIDs
	github.com/jackc/pgx/v5 v5.12.0 // PostgreSQL driver (database/sql adapter) and error codes
	github.com/johannesboyne/gofakes3 v1.2.0 // tests: an in-process S3 server, so the S3 back end of retained attachments is tested for real
	github.com/modelcontextprotocol/go-sdk v1.8.0 // the MCP gateway: the official MCP SDK (Streamable HTTP and stdio server towards agents, client of upstream servers)
	github.com/pressly/goose/v3 v3.30.0 // embedded migrations per dialect, with a lock for replicas
	github.com/prometheus/client_golang v1.25.0 // /metrics
	github.com/spf13/cobra v1.10.2 // the CLI: commands, flags, help
	github.com/spf13/pflag v1.0.9 // serve's flags from the settings table (cobra's flag package)
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1 // tests: an independent check of our Standard Webhooks signatures
	go.yaml.in/yaml/v3 v3.0.6 // the MCP gateway's configuration file; tests: compose.yaml's settings are checked against serve's settings table
	modernc.org/sqlite v1.62.0 // the default store: embedded SQLite without cgo
)

require github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // ijson: RFC 7493 checks of JSON received (duplicate member names), the Go team's encoding/json/v2 jsontext

require github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // conformance kit: compiles each response schema of the contract once (JSON Schema 2020-12); kin-openapi recompiles per validation

require (
	cel.dev/expr v0.25.3 // indirect
	github.com/antlr4-go/antlr/v4 v4.13.1 // indirect
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.20 // indirect
	github.com/aws/aws-sdk-go-v2/feature/ec2/imds v1.19.2 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.2 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.2 // indirect
	github.com/aws/aws-sdk-go-v2/internal/v4a v1.5.2 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding v1.13.19 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/checksum v1.11.2 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/presigned-url v1.14.2 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/s3shared v1.20.2 // indirect
	github.com/aws/aws-sdk-go-v2/service/signin v1.9.0 // indirect
	github.com/aws/aws-sdk-go-v2/service/sso v1.37.0 // indirect
	github.com/aws/aws-sdk-go-v2/service/ssooidc v1.42.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/emersion/go-sasl v0.0.0-20241020182733-b788ff22d5a6 // indirect
	github.com/go-openapi/jsonpointer v0.22.5 // indirect
	github.com/go-openapi/swag/jsonname v0.25.5 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
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
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	github.com/segmentio/asm v1.2.1 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/exp v0.0.0-20261109185158-a52e3aef5920 // indirect
	golang.org/x/oauth2 v0.37.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	golang.org/x/tools v0.52.1-0.20261106145633-d407941a339a // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	modernc.org/libc v1.80.2 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)

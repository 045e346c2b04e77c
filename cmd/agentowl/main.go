// Command agentowl is the AgentOwl server (`agentowl serve`), its offline
// administration (`agentowl admin …`) and the operator CLI (every other
// command, an HTTP client of the operator API). It only turns flags and the
// environment into configuration (settings.go); internal/server assembles
// the server.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

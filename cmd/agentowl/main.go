// Command agentowl is the AgentOwl server (`agentowl serve`), its offline
// administration (`agentowl admin …`) and the operator CLI (every other
// command, an HTTP client of the operator API). It only turns flags and the
// environment into configuration (settings.go); internal/server assembles
// the server.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code))
		}
		os.Exit(1)
	}
}

// exitCode is an error that asks for a particular exit status, such as
// work-doctor's 1 for warnings and 2 for errors.
type exitCode int

func (c exitCode) Error() string { return "exit status " + strconv.Itoa(int(c)) }

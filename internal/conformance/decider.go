package conformance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Decider approves or denies a pending request of the provider under test.
// Decisions need a person (or the provider's operator interface): the kit
// cannot make them over AAP.
type Decider interface {
	// Decide approves (approve) or denies a request. An error is
	// reported as evidence; the check then reads the request back.
	Decide(ctx context.Context, requestID string, approve bool) (output string, err error)
}

// CommandDecider runs a shell command per decision: {id} is replaced by
// the request ID and {decision} by approve or deny, as in
// `agentowl approvals decide {id} --{decision}`.
type CommandDecider struct {
	Template string
	// Env, if set, is the command's environment (else the kit's).
	Env []string
}

// Decide runs the command.
func (d *CommandDecider) Decide(ctx context.Context, requestID string, approve bool) (string, error) {
	if !uuidLike(requestID) {
		return "", fmt.Errorf("refusing to put request ID %q in a shell command: it is not a UUID", requestID)
	}
	decision := "deny"
	if approve {
		decision = "approve"
	}
	line := strings.NewReplacer("{id}", requestID, "{decision}", decision).Replace(d.Template)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	cmd.Env = d.Env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	text := fmt.Sprintf("$ %s\n%s", line, strings.TrimSpace(out.String()))
	if err != nil {
		return text, fmt.Errorf("decide command %q: %w", line, err)
	}
	return text, nil
}

// InteractiveDecider asks a person: it prints the request ID and the
// decision wanted, and waits for a line on In once it has been made.
type InteractiveDecider struct {
	In  io.Reader
	Out io.Writer

	mu sync.Mutex
	rd *bufio.Reader
}

// Decide prints the instruction and waits for Enter.
func (d *InteractiveDecider) Decide(ctx context.Context, requestID string, approve bool) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rd == nil {
		d.rd = bufio.NewReader(d.In)
	}
	word := "DENY"
	if approve {
		word = "APPROVE"
	}
	fmt.Fprintf(d.Out, "\n>>> Please %s request %s in the provider, then press Enter: ", word, requestID)
	done := make(chan error, 1)
	go func() {
		_, err := d.rd.ReadString('\n')
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && err != io.EOF {
			return "", err
		}
		return "asked a person to " + strings.ToLower(word) + " " + requestID, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func uuidLike(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}

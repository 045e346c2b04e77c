package mcpgateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioLine is the longest line the gateway reads from an agent on
// --stdio (the Go SDK's default frame limit). A longer line is skipped
// whole and answered with a parse error.
const MaxStdioLine = 16 << 20

// lineTransport is MCP's stdio transport (newline-delimited JSON-RPC) for
// one agent. It replaces the Go SDK's mcp.StdioTransport (go-sdk v1.8.0),
// whose connection ends at the first line that is not a JSON-RPC message
// and whose decoder can join a cut-off line with the next one, so that
// one bad line ended the gateway. Here a bad line is answered with a
// JSON-RPC parse error (-32700, id null) and the next line is read; a line
// over max bytes is skipped to its end and answered the same way. The
// connection also knows which calls are still unanswered, so a stopping
// gateway can write their answers before it closes (drain).
type lineTransport struct{ conn *lineConn }

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }

type lineConn struct {
	in  *bufio.Reader
	max int

	wmu sync.Mutex // one message per line, whole
	out io.Writer

	lines     chan []byte // read lines, in order
	readErr   error       // why the reader stopped; set before lines is closed
	closeOnce sync.Once
	closed    chan struct{}

	mu      sync.Mutex
	pending map[any]bool // IDs of calls read and not answered yet
	idle    chan struct{}
}

func newLineConn(r io.Reader, w io.Writer, max int) *lineConn {
	c := &lineConn{in: bufio.NewReaderSize(r, 64<<10), max: max, out: w, lines: make(chan []byte),
		closed: make(chan struct{}), pending: map[any]bool{}}
	go c.readLines()
	return c
}

// readLines sends every line of input to c.lines until the input ends or
// the connection closes. A line over c.max bytes is sent as nil.
func (c *lineConn) readLines() {
	defer close(c.lines)
	for {
		line, err := c.readLine()
		if err != nil && len(line) == 0 {
			c.readErr = err
			return
		}
		select {
		case c.lines <- line:
		case <-c.closed:
			return
		}
		if err != nil {
			c.readErr = err
			return
		}
	}
}

// readLine reads up to the next newline; nil (with no error) for a line
// longer than c.max, whose bytes are discarded up to its end.
func (c *lineConn) readLine() ([]byte, error) {
	var line []byte
	over := false
	for {
		frag, err := c.in.ReadSlice('\n')
		if !over {
			if len(line)+len(frag) > c.max+1 { // +1: the newline
				over, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			if over {
				return nil, err
			}
			return line, err
		case over:
			return nil, nil
		default:
			return line, nil
		}
	}
}

// Read returns the next JSON-RPC message, answering every line that is not
// one with a parse error first.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var line []byte
		var ok bool
		select {
		case line, ok = <-c.lines:
		case <-c.closed:
			return nil, io.EOF
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !ok {
			if c.readErr == nil || errors.Is(c.readErr, io.EOF) {
				return nil, io.EOF
			}
			return nil, c.readErr
		}
		if line == nil {
			if err := c.parseError(fmt.Sprintf("Parse error: the line is longer than %d bytes and was skipped", c.max)); err != nil {
				return nil, err
			}
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			if err := c.parseError("Parse error: each line must be one JSON-RPC 2.0 message"); err != nil {
				return nil, err
			}
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
			c.mu.Lock()
			c.pending[req.ID.Raw()] = true
			c.mu.Unlock()
		}
		return msg, nil
	}
}

// parseError writes JSON-RPC's answer to input that is not a message: the
// request's ID cannot be known, so it is null.
func (c *lineConn) parseError(message string) error {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": jsonrpc.CodeParseError, "message": message}})
	return c.writeLine(b)
}

func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	if err := c.writeLine(b); err != nil {
		return err
	}
	if res, ok := msg.(*jsonrpc.Response); ok && res.ID.IsValid() {
		c.mu.Lock()
		delete(c.pending, res.ID.Raw())
		if len(c.pending) == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *lineConn) writeLine(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	_, err := c.out.Write(append(b, '\n'))
	return err
}

// drain waits until every call read so far has been answered, or ctx ends.
func (c *lineConn) drain(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }

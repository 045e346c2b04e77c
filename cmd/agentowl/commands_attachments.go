package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// Retained attachments (docs/attachments.md): the manifest of an event and
// the download of one file, as the seed writes it:
//
//	agentowl attachments download <event> <attachment> <new-file>

func (c *cli) attachmentsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "attachments", Short: "List and download the retained attachments of inbound events"}
	list := c.listCmd("list EVENT", "Show an event's attachments: names, sizes, SHA-256, expiry, availability",
		func(args []string) string { return c.attachmentsPath(args[0]) },
		"ID\tNAME\tSIZE\tAVAILABILITY\tEXPIRES\tDECLARED\tSNIFFED\tSHA256", "id", "name", "size", "availability", "expires_at",
		"content_type", "sniffed_type", "sha256")
	list.Args = cobra.ExactArgs(1)
	c.tenantFlag(list)
	download := &cobra.Command{Use: "download EVENT ATTACHMENT NEW-FILE",
		Short: "Save one attachment to a new file, checking its SHA-256; never overwrites",
		Long: "Streams the attachment to a temporary file in NEW-FILE's directory, checks its size and SHA-256 against\n" +
			"what the server recorded, then gives it the name NEW-FILE (mode 0600). An existing NEW-FILE is never\n" +
			"replaced: the command refuses and says so. Expired, blocked and missing attachments are refused.",
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := c.downloadAttachment(cmd.Context(), c.attachmentsPath(args[0])+"/"+url.PathEscape(args[1]), args[2])
			if err != nil {
				return err
			}
			return c.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "Saved %s (%d bytes, sha256 %s)\n", res.Path, res.Size, res.SHA256)
			})
		}}
	c.tenantFlag(download)
	cmd.AddCommand(list, download)
	return cmd
}

func (c *cli) attachmentsPath(event string) string {
	return c.tenantPath("/events/" + url.PathEscape(event) + "/attachments")
}

// downloaded is what download reports.
type downloaded struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// errExists is the refusal to replace a file.
func errExists(path string) error {
	return fmt.Errorf("refusing to overwrite %s: it already exists; name a new file", path)
}

// downloadAttachment streams the file at path into a temporary file next
// to target, checks it against the answer's Content-Length and Repr-Digest
// (the SHA-256 recorded when the message arrived), and only then links it
// to target, which must not exist.
func (c *cli) downloadAttachment(ctx context.Context, path, target string) (*downloaded, error) {
	if _, err := os.Lstat(target); err == nil {
		return nil, errExists(target)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	base, token, err := c.server()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, answerError(resp, data)
	}
	want, err := reprDigest(resp.Header.Get("Repr-Digest"))
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".agentowl-download-*")
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), resp.Body)
	if err != nil {
		return nil, fmt.Errorf("download interrupted after %d bytes: %w", n, err)
	}
	if err := check(n, resp.ContentLength, h, want); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := place(tmp.Name(), target); err != nil {
		return nil, err
	}
	done = true
	return &downloaded{Path: target, Size: n, SHA256: fmt.Sprintf("%x", want)}, nil
}

// check compares what was received with what the server announced.
func check(n, length int64, h hash.Hash, want []byte) error {
	if length >= 0 && n != length {
		return fmt.Errorf("received %d bytes of %d; nothing was saved", n, length)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("the SHA-256 of the received bytes (%x) is not the recorded one (%x); nothing was saved", got, want)
	}
	return nil
}

// place gives the checked temporary file its name without replacing
// anything: a hard link fails if target appeared meanwhile. Where links are
// not supported, a rename after a last check does.
func place(tmp, target string) error {
	err := os.Link(tmp, target)
	switch {
	case err == nil:
		return os.Remove(tmp)
	case errors.Is(err, os.ErrExist):
		return errExists(target)
	}
	if _, err := os.Lstat(target); err == nil {
		return errExists(target)
	}
	return os.Rename(tmp, target)
}

// reprDigest reads the sha-256 of an RFC 9530 Repr-Digest header.
func reprDigest(v string) ([]byte, error) {
	for _, part := range strings.Split(v, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !strings.EqualFold(name, "sha-256") {
			continue
		}
		sum, err := base64.StdEncoding.DecodeString(strings.Trim(value, ":"))
		if err == nil && len(sum) == sha256.Size {
			return sum, nil
		}
	}
	return nil, errors.New("the server's answer has no sha-256 Repr-Digest to check the file against; nothing was saved")
}

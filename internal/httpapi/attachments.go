package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/access"
	"github.com/agentowl/agentowl/internal/attachment"
)

// Retained attachments (docs/attachments.md): manifests and private,
// streamed downloads, for runtimes (/runtime/v1/work/{work}/attachments)
// and operators (/api/v1/tenants/{tenant}/events/{id}/attachments).

// wireAttachment is a manifest entry with where to download it.
type wireAttachment struct {
	attachment.Entry
	URL string `json:"url"`
}

type wireManifest struct {
	WorkID  string           `json:"work_id,omitempty"`
	EventID string           `json:"event_id"`
	Items   []wireAttachment `json:"items"`
}

func (s *Server) files() (*attachment.Service, error) {
	if s.attachments == nil {
		return nil, agentowl.Errorf(agentowl.ECodeNotFound, "Retained attachments are not served here.")
	}
	return s.attachments, nil
}

func manifestOf(m *attachment.Manifest, base string) wireManifest {
	out := wireManifest{WorkID: m.WorkID, EventID: m.EventID, Items: []wireAttachment{}}
	for _, e := range m.Entries() {
		out.Items = append(out.Items, wireAttachment{Entry: e, URL: base + "/" + url.PathEscape(e.ID)})
	}
	return out
}

// listWorkAttachments is a runtime's manifest of its work's event.
func (s *Server) listWorkAttachments(r *http.Request, c *agentowl.RuntimeCredential) (int, any, error) {
	svc, err := s.files()
	if err != nil {
		return 0, nil, err
	}
	m, err := svc.WorkManifest(r.Context(), c, r.PathValue("work"))
	if err != nil {
		return 0, nil, err
	}
	base := s.work.Config().PublicURL + "/runtime/v1/work/" + url.PathEscape(m.WorkID) + "/attachments"
	return http.StatusOK, manifestOf(m, base), nil
}

// downloadWorkAttachment streams a file of a runtime's work.
func (s *Server) downloadWorkAttachment(r *http.Request, c *agentowl.RuntimeCredential) (int, any, error) {
	svc, err := s.files()
	if err != nil {
		return 0, nil, err
	}
	a, err := svc.WorkAttachment(r.Context(), c, r.PathValue("work"), r.PathValue("attachment"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, &download{svc: svc, a: a}, nil
}

// listEventAttachments is an operator's manifest of an event.
func (s *Server) listEventAttachments(r *http.Request, p *access.Principal) (int, any, error) {
	svc, err := s.files()
	if err != nil {
		return 0, nil, err
	}
	m, err := svc.EventManifest(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	base := s.work.Config().PublicURL + "/api/v1/tenants/" + url.PathEscape(r.PathValue("tenant")) + "/events/" +
		url.PathEscape(m.EventID) + "/attachments"
	return http.StatusOK, manifestOf(m, base), nil
}

// downloadEventAttachment streams a file of an event to an operator.
func (s *Server) downloadEventAttachment(r *http.Request, p *access.Principal) (int, any, error) {
	svc, err := s.files()
	if err != nil {
		return 0, nil, err
	}
	a, err := svc.EventAttachment(r.Context(), p, r.PathValue("tenant"), r.PathValue("id"), r.PathValue("attachment"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, &download{svc: svc, a: a}, nil
}

// streamed is a handler's answer that writes itself: respond hands it the
// response instead of encoding JSON.
type streamed interface {
	stream(s *Server, w http.ResponseWriter, r *http.Request)
}

// download streams one retained file with the headers that keep it inert
// wherever it lands: always application/octet-stream with nosniff and a
// sandboxing policy, as an attachment under its safe name, never cached.
type download struct {
	svc *attachment.Service
	a   *agentowl.Attachment
}

// downloadChunk is how much of a file one write carries; each write gets
// the full write timeout, so a large file on a slow link is not cut off
// while it makes progress.
const downloadChunk = 256 << 10

func (d *download) stream(s *Server, w http.ResponseWriter, r *http.Request) {
	a := d.a
	offset, length, partial, err := byteRange(r, a.Size, attachment.ETag(a))
	if err != nil {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(a.Size, 10))
		s.writeError(w, r, err)
		return
	}
	body, err := d.svc.Open(r.Context(), a, offset, length)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer body.Close()
	h := w.Header()
	for _, kv := range attachment.InertHeaders(a) {
		h.Set(kv.Name, kv.Value)
	}
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	h.Set("Accept-Ranges", "bytes")
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", offset, offset+length-1, a.Size))
	}
	w.WriteHeader(status)
	n, err := io.CopyBuffer(&progressWriter{w: w, extend: func() { s.extendWriteDeadline(r, 0) }}, io.LimitReader(body, length),
		make([]byte, downloadChunk))
	if err == nil && n != length {
		err = fmt.Errorf("the stored object ended after %d of %d bytes", n, length)
	}
	if err != nil {
		if r.Context().Err() == nil {
			s.log.Error("attachment download cut short", "request_id", requestID(r), "attachment", a.ID, "err", err)
		}
		// The status is sent: end the connection so the client sees a body
		// shorter than its Content-Length, never a complete-looking file.
		panic(http.ErrAbortHandler)
	}
}

// progressWriter renews the write deadline before each write.
type progressWriter struct {
	w      io.Writer
	extend func()
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.extend()
	return p.w.Write(b)
}

// byteRange reads the request's Range (RFC 9110, 14.2): one range of
// bytes, honoured unless If-Range names another version. It returns the
// whole file for no Range, several ranges or one it cannot parse (which
// the RFC lets a server ignore), and range_not_satisfiable for a range
// that starts past the end.
func byteRange(r *http.Request, size int64, etag string) (offset, length int64, partial bool, err error) {
	spec, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, size, false, nil
	}
	if ir := r.Header.Get("If-Range"); ir != "" && ir != etag {
		return 0, size, false, nil
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, size, false, nil
	}
	unsatisfiable := agentowl.Errorf(agentowl.ECodeRangeNotSatisfied, "The range %q is outside the file's %d bytes.", spec, size)
	if first == "" { // the last n bytes
		n, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || n < 0 {
			return 0, size, false, nil
		}
		if n == 0 || size == 0 {
			return 0, 0, false, unsatisfiable
		}
		n = min(n, size)
		return size - n, n, true, nil
	}
	start, perr := strconv.ParseInt(first, 10, 64)
	if perr != nil || start < 0 {
		return 0, size, false, nil
	}
	end := size - 1
	if last != "" {
		if end, perr = strconv.ParseInt(last, 10, 64); perr != nil || end < start {
			return 0, size, false, nil
		}
		end = min(end, size-1)
	}
	if start >= size {
		return 0, 0, false, unsatisfiable
	}
	return start, end - start + 1, true, nil
}

package ingress

import (
	"context"
	"errors"

	"github.com/agentowl/agentowl"
	"github.com/agentowl/agentowl/internal/attachment"
)

// RetainParts is the part sink of retained attachments (docs/attachments.md):
// each part of an email other than its body text streams into private
// object storage through svc, once for each binding the message is
// addressed to (every event owns its files: their expiry, quota and
// deletion are its own), and is committed with that binding's event.
func RetainParts(svc *attachment.Service) PartSinks {
	return func(ctx context.Context, bindings []*agentowl.Binding) PartSink {
		s := &retainer{ctx: ctx, uploads: map[string]*attachment.Upload{}}
		for _, b := range bindings {
			if _, dup := s.uploads[b.ID]; !dup {
				u := svc.NewUpload(b.TenantID)
				s.order, s.uploads[b.ID] = append(s.order, u), u
			}
		}
		return s
	}
}

// retainer fans a message's parts out to one upload per binding.
type retainer struct {
	ctx     context.Context
	order   []*attachment.Upload
	uploads map[string]*attachment.Upload // by binding ID
	writers []*attachment.PartWriter
}

// Begin implements PartSink.
func (s *retainer) Begin(p *MailPart) error {
	part := attachment.Part{Filename: p.Filename, ContentType: p.ContentType, ContentID: p.ContentID,
		Inline: p.Disposition == "inline" || (p.Disposition == "" && p.ContentID != "")}
	s.writers = s.writers[:0]
	for _, u := range s.order {
		w, err := u.Begin(s.ctx, part)
		if err != nil {
			return err
		}
		s.writers = append(s.writers, w)
	}
	return nil
}

// Write implements PartSink.
func (s *retainer) Write(b []byte) (int, error) {
	for _, w := range s.writers {
		if _, err := w.Write(b); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// End implements PartSink.
func (s *retainer) End(*MailPart) error {
	var errs []error
	for _, w := range s.writers {
		errs = append(errs, w.End(s.ctx))
	}
	s.writers = s.writers[:0]
	return errors.Join(errs...)
}

// Close implements PartSink: a refused message keeps nothing.
func (s *retainer) Close(err error) error {
	if err != nil {
		s.Release(s.ctx)
	}
	return nil
}

// Retention implements PartSink.
func (s *retainer) Retention(b *agentowl.Binding) Retention {
	if u, ok := s.uploads[b.ID]; ok {
		return u
	}
	return nil
}

// Release implements PartSink: uploads whose event did not commit (or was
// never accepted) are deleted; committed ones are already finished.
func (s *retainer) Release(ctx context.Context) {
	for _, u := range s.order {
		u.Finish(ctx, false)
	}
}

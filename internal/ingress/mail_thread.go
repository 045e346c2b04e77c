package ingress

// mailThread is the email threading rule (docs/channels.md).
func (s *Service) mailThread(m *Mail, sender string) Thread { return nil }

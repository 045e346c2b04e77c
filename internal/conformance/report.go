package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteText writes one line per check (status, ID, requirement, title),
// the reason and the evidence of each failure under it, and a summary line.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "AAP v1 conformance: %s %s\n", r.Subject, r.Target)
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %-38s  %-28s  %s\n", c.Status, c.ID, c.Requirement, c.Title)
		switch c.Status {
		case Skip:
			fmt.Fprintf(&b, "      skipped: %s\n", c.Reason)
		case Fail:
			fmt.Fprintf(&b, "      failed: %s\n", indent(c.Reason, "        "))
			for _, e := range c.Evidence {
				writeEvidence(&b, e)
			}
		}
	}
	fmt.Fprintf(&b, "%d checks: %d passed, %d failed, %d skipped (%.1fs)\n", len(r.Checks), r.Summary.Pass, r.Summary.Fail,
		r.Summary.Skip, r.FinishedAt.Sub(r.StartedAt).Seconds())
	_, err := io.WriteString(w, b.String())
	return err
}

func indent(s, prefix string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

func writeEvidence(b *strings.Builder, e Evidence) {
	if e.Note != "" {
		fmt.Fprintf(b, "      - %s\n", indent(e.Note, "        "))
	}
	if e.Request != nil {
		m := e.Request
		fmt.Fprintf(b, "      > %s %s%s\n", m.Method, m.URL, headerText(m.Headers))
		if m.Body != "" {
			fmt.Fprintf(b, "      > %s\n", indent(m.Body, "      > "))
		}
	}
	if e.Response != nil {
		m := e.Response
		fmt.Fprintf(b, "      < %d%s\n", m.Status, headerText(m.Headers))
		if m.Body != "" {
			fmt.Fprintf(b, "      < %s\n", indent(m.Body, "      < "))
		}
	}
	if e.Error != "" {
		fmt.Fprintf(b, "      ! %s\n", e.Error)
	}
}

func headerText(h map[string]string) string {
	if len(h) == 0 {
		return ""
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+h[k])
	}
	return "  [" + strings.Join(parts, "; ") + "]"
}

// WriteJSON writes the report as one indented JSON document.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the report as JUnit XML: one test suite, one test case
// per check (named by its ID, classed by its requirement).
func WriteJUnit(w io.Writer, r *Report) error {
	s := junitSuite{Name: "aap-conformance-" + r.Subject, Tests: len(r.Checks), Failures: r.Summary.Fail,
		Skipped: r.Summary.Skip, Time: fmt.Sprintf("%.3f", r.FinishedAt.Sub(r.StartedAt).Seconds()),
		Timestamp: r.StartedAt.Format("2006-01-02T15:04:05")}
	for _, c := range r.Checks {
		jc := junitCase{Name: c.ID + ": " + c.Title, Classname: c.Requirement, Time: fmt.Sprintf("%.3f", float64(c.DurationMS)/1000)}
		switch c.Status {
		case Fail:
			var b strings.Builder
			for _, e := range c.Evidence {
				writeEvidence(&b, e)
			}
			jc.Failure = &junitFailure{Message: c.Reason, Type: c.Requirement, Text: b.String()}
		case Skip:
			jc.Skipped = &junitSkipped{Message: c.Reason}
		}
		s.Cases = append(s.Cases, jc)
	}
	doc := junitSuites{Name: "agentowl conformance " + r.Subject + " " + r.Target, Tests: s.Tests, Failures: s.Failures,
		Skipped: s.Skipped, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
